//! Model-based test of the journal: random appends, reconnecting readers and
//! restarts, checked against an in-memory reference model of every session.
//!
//! The reference model is, per session, the list of `(id, seq, type)` the
//! journal must hold: an acknowledged append adds its events with the next
//! seqs (in the order the appends were sent: the writer is one FIFO thread),
//! a refused command (stale turn, input during a turn) adds nothing, and a
//! restart changes nothing. Ids are chosen by the writer, so the model learns
//! them when they are first seen (from a hub subscription when the case
//! observes the hub, else from redb) and from then on they must never change.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::tests::{new_deployment, success};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::outbox::Outbox;
use super::postgres::{LeaseOptions, PgEngine};
use super::redb::{RedbEngine, RedbOptions, SESSION_CACHE};
use super::start::AppendAck;
use super::*;
use crate::journal::{EventType, NewEvent, StoredEvent};
use crate::store::test_calls::HostCalls;

/// A reader that has not seen what it must see by then has hung.
const DEADLINE: Duration = Duration::from_secs(20);
/// More than the hub's per-session channel capacity (1024).
const LAG_BURST: usize = 1300;
/// What agents append (SESSION_ENDED is left out: the SSE stream stops there).
const KINDS: [EventType; 6] = [
    EventType::MessageStart,
    EventType::MessageDelta,
    EventType::MessageEnd,
    EventType::ToolCall,
    EventType::ToolResult,
    EventType::TurnError,
];

// ----- Operations -----

/// One append: a session (index into the case's sessions) and its events.
type Append = (Index, Vec<EventType>);

#[derive(Debug, Clone)]
enum Cursor {
    /// No Last-Event-ID: replay from seq 0.
    Start,
    /// The id of a committed event of the session.
    At(Index),
    /// The id of the session's last committed event.
    Last,
}

/// How a reconnecting reader and the concurrent appends overlap.
#[derive(Debug, Clone)]
enum Timing {
    /// The first `lead` appends are sent (not awaited) before the reader
    /// starts, the others while it runs; a `slow` reader sleeps between
    /// replay chunks, so commits land during its replay.
    Race { lead: usize, slow: bool },
    /// The reader finishes its replay before the appends start, so they all
    /// reach it through the hub.
    Pause,
}

#[derive(Debug, Clone)]
enum Op {
    /// Appends sent back to back without waiting (the writer may commit them
    /// in one batch), plus possibly one with a turn that is not running,
    /// which must be refused without affecting the others.
    Append {
        appends: Vec<Append>,
        stale: Option<Index>,
    },
    /// A stream (re)connects, then `concurrent` appends run while it replays
    /// and tails; it must deliver exactly the model's events after the cursor.
    Reconnect {
        session: Index,
        cursor: Cursor,
        chunk: usize,
        timing: Timing,
        concurrent: Vec<Append>,
    },
    /// Refused input during a turn, finish the turn (Ended), refused append
    /// to the finished turn, then a new input starts the next turn.
    NextTurn {
        session: Index,
        closing: Vec<EventType>,
        text: bool,
    },
    /// Appends still queued, the writer and store dropped, the file reopened.
    Restart { in_flight: Vec<Append> },
}

fn kinds(max: usize) -> impl Strategy<Value = Vec<EventType>> {
    prop::collection::vec(prop::sample::select(KINDS.to_vec()), 1..=max)
}

fn append() -> impl Strategy<Value = Append> {
    (any::<Index>(), kinds(20))
}

fn op() -> impl Strategy<Value = Op> {
    let cursor = prop_oneof![
        Just(Cursor::Start),
        any::<Index>().prop_map(Cursor::At),
        Just(Cursor::Last),
    ];
    let timing = prop_oneof![
        2 => (0..=2usize, any::<bool>()).prop_map(|(lead, slow)| Timing::Race { lead, slow }),
        1 => Just(Timing::Pause),
    ];
    prop_oneof![
        4 => (
            prop::collection::vec(append(), 1..=3),
            prop::option::of(any::<Index>()),
        )
            .prop_map(|(appends, stale)| Op::Append { appends, stale }),
        4 => (
            any::<Index>(),
            cursor,
            1..=4usize,
            timing,
            prop::collection::vec(append(), 0..=4),
        )
            .prop_map(|(session, cursor, chunk, timing, concurrent)| Op::Reconnect {
                session,
                cursor,
                chunk,
                timing,
                concurrent,
            }),
        1 => (any::<Index>(), prop::collection::vec(prop::sample::select(KINDS.to_vec()), 0..=3), any::<bool>())
            .prop_map(|(session, closing, text)| Op::NextTurn { session, closing, text }),
        1 => prop::collection::vec(append(), 0..=2).prop_map(|in_flight| Op::Restart { in_flight }),
    ]
}

/// A case: how many sessions, whether a hub subscription observes each
/// session for the whole case, and the operations.
/// (sessions, observe with hub subscribers, a writer session cache of one, ops)
fn case() -> impl Strategy<Value = (usize, bool, bool, Vec<Op>)> {
    (
        2..=3usize,
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(op(), 1..=25),
    )
}

// ----- The reader: the SSE endpoint's algorithm -----

/// How a reader got its events (summed over the run, printed at the end).
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    cases: usize,
    readers: usize,
    restarts: usize,
    appended: usize,
    /// Delivered from redb before tailing.
    replayed: usize,
    /// Delivered from the hub.
    tailed: usize,
    /// Delivered from redb after a gap or a lag.
    caught_up: usize,
    /// Hub events dropped because replay had already sent them.
    duplicates: usize,
    gaps: usize,
    lags: usize,
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.cases += other.cases;
        self.readers += other.readers;
        self.restarts += other.restarts;
        self.appended += other.appended;
        self.replayed += other.replayed;
        self.tailed += other.tailed;
        self.caught_up += other.caught_up;
        self.duplicates += other.duplicates;
        self.gaps += other.gaps;
        self.lags += other.lags;
    }
}

/// Stops a reader between its replay and its tail.
struct Pause {
    replayed: oneshot::Sender<()>,
    resume: oneshot::Receiver<()>,
}

async fn read_chunk(
    store: &Db,
    session: Uuid,
    from: u64,
    chunk: usize,
) -> Result<Vec<StoredEvent>, String> {
    store
        .read(move |s| s.events(session, from, chunk))
        .await
        .map_err(|e| format!("read from {from}: {e}"))
}

/// Streams a session from seq `from` until it has delivered every event
/// below `until`, as `api::events` does (less shutdown, key revocation and
/// SESSION_ENDED): subscribe first, replay redb in chunks, tail the hub
/// dropping seqs already sent, re-read redb on a gap or a lag. Then checks
/// that nothing beyond `until` is pending. A `slow` reader sleeps between
/// replay chunks.
async fn stream(
    store: Db,
    session: Uuid,
    from: u64,
    until: u64,
    chunk: usize,
    slow: bool,
    pause: Option<Pause>,
) -> Result<(Vec<StoredEvent>, Stats), String> {
    let mut stats = Stats {
        readers: 1,
        ..Stats::default()
    };
    let mut out = Vec::new();
    let mut subscription = store.hub().subscribe(session);
    let mut next = from;
    let mut events = read_chunk(&store, session, from, chunk).await?;
    loop {
        let full = events.len() == chunk;
        for event in events {
            next = event.seq + 1;
            out.push(event);
            stats.replayed += 1;
        }
        if !full {
            break;
        }
        if slow {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        events = read_chunk(&store, session, next, chunk).await?;
    }
    if let Some(pause) = pause {
        let _ = pause.replayed.send(());
        let _ = pause.resume.await;
    }
    while next < until {
        let catch_up = match subscription.rx.recv().await {
            Ok(event) if event.seq < next => {
                stats.duplicates += 1;
                false
            }
            Ok(event) if event.seq == next => {
                next += 1;
                out.push(event);
                stats.tailed += 1;
                false
            }
            Ok(_) => {
                stats.gaps += 1;
                true
            }
            Err(RecvError::Lagged(_)) => {
                stats.lags += 1;
                true
            }
            Err(RecvError::Closed) => return Err("the hub closed the subscription".into()),
        };
        if catch_up {
            loop {
                let more = read_chunk(&store, session, next, chunk).await?;
                let full = more.len() == chunk;
                for event in more {
                    next = event.seq + 1;
                    out.push(event);
                    stats.caught_up += 1;
                }
                if !full {
                    break;
                }
            }
        }
    }
    // Whatever the hub still holds must be a duplicate: nothing was appended
    // beyond `until`.
    loop {
        match subscription.rx.try_recv() {
            Ok(event) if event.seq < next => stats.duplicates += 1,
            Ok(event) => return Err(format!("unexpected event seq {} after the end", event.seq)),
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Lagged(_)) => stats.lags += 1,
            Err(TryRecvError::Closed) => return Err("the hub closed the subscription".into()),
        }
    }
    Ok((out, stats))
}

// ----- Fixtures -----

/// The events `turn_start_events_for` journals for an input.
fn turn_start_types(text: bool) -> Vec<String> {
    let mut types = vec!["TURN_STARTED".to_string()];
    if text {
        types.extend(["MESSAGE_START", "MESSAGE_DELTA", "MESSAGE_END"].map(String::from));
    }
    types
}

fn input(text: bool) -> Value {
    if text {
        json!("hello")
    } else {
        json!({"choice": 2})
    }
}

/// Where a case keeps its journal: a redb file, or a PostgreSQL database.
#[derive(Clone)]
enum Backend {
    Redb(PathBuf),
    Postgres(String),
}

/// Opens the store (a writer on redb keeps `cache` sessions cached); a
/// "restart" on PostgreSQL is a new host on the same database.
fn open(backend: &Backend, cache: usize) -> Result<Db, StoreError> {
    match backend {
        Backend::Redb(path) => {
            let engine = RedbEngine::open(path, RedbOptions::default())?.with_session_cache(cache);
            Ok(Db::new(engine))
        }
        Backend::Postgres(url) => {
            // The sync client may not run on an async worker.
            let engine = tokio::task::block_in_place(|| {
                PgEngine::open(url, Uuid::now_v7(), LeaseOptions::default())
            })?;
            Ok(Db::new(engine))
        }
    }
}

/// Reopens the store once the previous writer thread has let go of it.
async fn reopen(backend: &Backend, cache: usize) -> Result<Db, TestCaseError> {
    let mut reopened = open(backend, cache);
    for _ in 0..500 {
        if reopened.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        reopened = open(backend, cache);
    }
    reopened.map_err(|e| TestCaseError::fail(format!("reopen: {e}")))
}

fn fail(context: &str, err: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{context}: {err}"))
}

// ----- The model and the system under test -----

struct ModelSession {
    id: Uuid,
    turn: u32,
    /// The running turn's outbox: its appends coalesce as a turn's do.
    outbox: Arc<Outbox>,
    /// Committed events whose ids the model knows: (id, seq, type).
    events: Vec<(Uuid, u64, String)>,
    /// Types of acknowledged (or about to be) events whose ids it has not
    /// learned yet; their seqs follow `events`.
    pending: Vec<String>,
    /// Observes the session's hub channel for the whole case.
    observer: Option<Subscription>,
}

struct Harness {
    backend: Backend,
    store: Option<Db>,
    writer: Option<WriterHandle>,
    observe: bool,
    sessions: Vec<ModelSession>,
    /// Every event id seen, over all sessions.
    ids: HashSet<Uuid>,
    payloads: u64,
    stats: Stats,
    /// The writer's session cache (kept across restarts).
    session_cache: usize,
}

impl Harness {
    /// `tiny_cache`: the writer keeps one session cached, so nearly every
    /// command re-reads its session from redb.
    async fn start(
        backend: Backend,
        sessions: usize,
        observe: bool,
        tiny_cache: bool,
    ) -> Result<Self, TestCaseError> {
        let cache = if tiny_cache { 1 } else { SESSION_CACHE };
        let store = open(&backend, cache).map_err(|e| fail("open", e))?;
        let writer = Writer::spawn(store.clone()).map_err(|e| fail("spawn", e))?;
        let d = writer
            .create_deployment(new_deployment(None))
            .await
            .map_err(|e| fail("deploy", e))?;
        writer
            .finish_build(d.id, success())
            .await
            .map_err(|e| fail("build", e))?;
        let mut harness = Harness {
            backend,
            store: Some(store),
            writer: Some(writer),
            observe,
            sessions: Vec::new(),
            ids: HashSet::new(),
            payloads: 0,
            session_cache: cache,
            stats: Stats {
                cases: 1,
                ..Stats::default()
            },
        };
        for i in 0..sessions {
            let text = i.is_multiple_of(2);
            let (record, ticket) = harness
                .writer()?
                .new_session("app".into(), "/chat".into(), input(text))
                .await
                .map_err(|e| fail("create session", e))?;
            prop_assert_eq!(ticket.turn, 1);
            let mut pending = vec!["SESSION_CREATED".to_string()];
            pending.extend(turn_start_types(text));
            // Created before its observer: its first events come from redb.
            let mut session = ModelSession {
                id: record.id,
                turn: 1,
                outbox: Arc::new(Outbox::new(record.id, 1)),
                events: Vec::new(),
                pending,
                observer: None,
            };
            harness.learn_from_store(&mut session)?;
            if observe {
                session.observer = Some(harness.store()?.hub().subscribe(record.id));
            }
            harness.sessions.push(session);
        }
        harness.check(true).await?;
        Ok(harness)
    }

    fn store(&self) -> Result<&Db, TestCaseError> {
        self.store
            .as_ref()
            .ok_or_else(|| TestCaseError::fail("no store"))
    }

    fn writer(&self) -> Result<&WriterHandle, TestCaseError> {
        self.writer
            .as_ref()
            .ok_or_else(|| TestCaseError::fail("no writer"))
    }

    fn new_events(&mut self, kinds: &[EventType]) -> Vec<NewEvent> {
        kinds
            .iter()
            .map(|&kind| {
                self.payloads += 1;
                // Every other payload mimics the envelope's `type`.
                let payload = if self.payloads.is_multiple_of(2) {
                    json!({"n": self.payloads, "type": "SESSION_ENDED"})
                } else {
                    json!({"n": self.payloads, "text": "a \"quoted\" line\n"})
                };
                NewEvent::untyped(kind, payload)
            })
            .collect()
    }

    /// Sends an append of the session's running turn; the model expects its
    /// events once acknowledged.
    async fn send(
        &mut self,
        session: usize,
        kinds: &[EventType],
    ) -> Result<AppendAck, TestCaseError> {
        let events = self.new_events(kinds);
        let outbox = self.sessions[session].outbox.clone();
        let ack = self
            .writer()?
            .append(&outbox, events)
            .await
            .map_err(|e| fail("append", e))?;
        self.sessions[session]
            .pending
            .extend(kinds.iter().map(|k| k.as_str().to_string()));
        self.stats.appended += kinds.len();
        Ok(ack)
    }

    async fn acknowledged(acks: Vec<AppendAck>) -> Result<(), TestCaseError> {
        for ack in acks {
            ack.await
                .map_err(|e| fail("ack dropped", e))?
                .map_err(|e| fail("append refused", e))?;
        }
        Ok(())
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let n = self.sessions.len();
        match op {
            Op::Append { appends, stale } => {
                let mut acks = Vec::new();
                let mut refused = None;
                for (i, (session, kinds)) in appends.iter().enumerate() {
                    acks.push(self.send(session.index(n), kinds).await?);
                    if let (0, Some(stale)) = (i, stale) {
                        // A turn that has not started: refused, nothing written.
                        let s = &self.sessions[stale.index(n)];
                        let outbox = Arc::new(Outbox::new(s.id, s.turn + 1));
                        let events = self.new_events(&[EventType::MessageDelta]);
                        refused = Some(
                            self.writer()?
                                .append(&outbox, events)
                                .await
                                .map_err(|e| fail("append", e))?,
                        );
                    }
                }
                Self::acknowledged(acks).await?;
                if let Some(ack) = refused {
                    let result = ack.await.map_err(|e| fail("ack dropped", e))?;
                    prop_assert!(
                        matches!(result, Err(StoreError::Conflict(_))),
                        "a stale append was not refused: {:?}",
                        result
                    );
                }
                self.check(false).await
            }
            Op::Reconnect {
                session,
                cursor,
                chunk,
                timing,
                concurrent,
            } => {
                let s = session.index(n);
                let (id, len) = (self.sessions[s].id, self.sessions[s].events.len());
                prop_assert!(self.sessions[s].pending.is_empty());
                let cursor = match cursor {
                    Cursor::Start => None,
                    Cursor::At(i) => Some(self.sessions[s].events[i.index(len)].0),
                    Cursor::Last => Some(self.sessions[s].events[len - 1].0),
                };
                // The endpoint's resume point: strictly after the cursor.
                let from = match cursor {
                    None => 0,
                    Some(event) => {
                        let store = self.store()?;
                        let position = tokio::task::block_in_place(|| store.event_seq(id, event))
                            .map_err(|e| fail("event_seq", e))?;
                        match position {
                            Some(seq) => seq + 1,
                            other => {
                                return Err(TestCaseError::fail(format!(
                                    "cursor {event} resolves to {other:?}"
                                )));
                            }
                        }
                    }
                };
                let until = len as u64
                    + concurrent
                        .iter()
                        .filter(|(i, _)| i.index(n) == s)
                        .map(|(_, kinds)| kinds.len() as u64)
                        .sum::<u64>();
                let (lead, slow, pause) = match timing {
                    Timing::Race { lead, slow } => (*lead, *slow, false),
                    Timing::Pause => (0, false, true),
                };
                let mut acks = Vec::new();
                for (session, kinds) in &concurrent[..lead.min(concurrent.len())] {
                    acks.push(self.send(session.index(n), kinds).await?);
                }
                let (pause, control) = if pause {
                    let (replayed, replayed_rx) = oneshot::channel();
                    let (resume_tx, resume) = oneshot::channel();
                    (
                        Some(Pause { replayed, resume }),
                        Some((replayed_rx, resume_tx)),
                    )
                } else {
                    (None, None)
                };
                let reader = tokio::spawn(stream(
                    self.store()?.clone(),
                    id,
                    from,
                    until,
                    *chunk,
                    slow,
                    pause,
                ));
                let resume = match control {
                    Some((replayed, resume)) => {
                        tokio::time::timeout(DEADLINE, replayed)
                            .await
                            .map_err(|e| fail("replay", e))?
                            .map_err(|e| fail("reader stopped", e))?;
                        Some(resume)
                    }
                    None => None,
                };
                for (session, kinds) in concurrent.iter().skip(lead) {
                    acks.push(self.send(session.index(n), kinds).await?);
                    tokio::task::yield_now().await;
                }
                Self::acknowledged(acks).await?;
                if let Some(resume) = resume {
                    let _ = resume.send(());
                }
                let (got, stats) = tokio::time::timeout(DEADLINE, reader)
                    .await
                    .map_err(|_| {
                        TestCaseError::fail(format!(
                            "reader from seq {from} did not reach seq {until} in {DEADLINE:?}"
                        ))
                    })?
                    .map_err(|e| fail("reader panicked", e))?
                    .map_err(TestCaseError::fail)?;
                self.stats.add(&stats);
                prop_assert_eq!(stats.gaps, 0, "the hub skipped a seq");
                self.check(false).await?;
                let expected = &self.sessions[s].events[from as usize..];
                let got: Vec<_> = got
                    .iter()
                    .map(|e| (e.id, e.seq, e.event_type().to_string()))
                    .collect();
                prop_assert_eq!(&got[..], expected, "stream from seq {}", from);
                Ok(())
            }
            Op::NextTurn {
                session,
                closing,
                text,
            } => {
                let s = session.index(n);
                let (id, turn) = (self.sessions[s].id, self.sessions[s].turn);
                let busy = self.writer()?.next_input(id, json!("too early")).await;
                prop_assert!(
                    matches!(busy, Err(StoreError::Conflict(_))),
                    "input during a turn was not refused: {:?}",
                    busy.map(|t| t.turn)
                );
                let events = self.new_events(closing);
                self.writer()?
                    .finish_turn(id, turn, events, TurnOutcome::Ended)
                    .await
                    .map_err(|e| fail("finish_turn", e))?;
                self.sessions[s]
                    .pending
                    .extend(closing.iter().map(|k| k.as_str().to_string()));
                // The finished turn's own outbox, as a late host call would use it.
                let outbox = self.sessions[s].outbox.clone();
                let events = self.new_events(&[EventType::MessageDelta]);
                let late = self
                    .writer()?
                    .append(&outbox, events)
                    .await
                    .map_err(|e| fail("append", e))?
                    .await
                    .map_err(|e| fail("ack dropped", e))?;
                prop_assert!(
                    matches!(late, Err(StoreError::Conflict(_))),
                    "an append to a finished turn was not refused: {:?}",
                    late
                );
                let ticket = self
                    .writer()?
                    .next_input(id, input(*text))
                    .await
                    .map_err(|e| fail("post_input", e))?;
                prop_assert_eq!(ticket.turn, turn + 1);
                self.sessions[s].turn = ticket.turn;
                self.sessions[s].outbox = Arc::new(Outbox::new(id, ticket.turn));
                self.sessions[s].pending.extend(turn_start_types(*text));
                self.check(false).await
            }
            Op::Restart { in_flight } => {
                let mut acks = Vec::new();
                for (session, kinds) in in_flight {
                    acks.push(self.send(session.index(n), kinds).await?);
                }
                // The writer drains its queue, commits, then lets go of the file.
                self.writer = None;
                Self::acknowledged(acks).await?;
                self.check(false).await?;
                for session in &mut self.sessions {
                    session.observer = None;
                }
                self.store = None;
                let store = reopen(&self.backend, self.session_cache).await?;
                self.writer = Some(Writer::spawn(store.clone()).map_err(|e| fail("spawn", e))?);
                for session in &mut self.sessions {
                    // A new process: the running turns' outboxes died with the old one.
                    session.outbox = Arc::new(Outbox::new(session.id, session.turn));
                    if self.observe {
                        session.observer = Some(store.hub().subscribe(session.id));
                    }
                }
                self.store = Some(store);
                self.stats.restarts += 1;
                self.check(true).await
            }
        }
    }

    /// Learns the ids of a session's pending events from redb.
    fn learn_from_store(&self, session: &mut ModelSession) -> Result<(), TestCaseError> {
        if session.pending.is_empty() {
            return Ok(());
        }
        let known = session.events.len();
        let store = self.store()?;
        let stored = tokio::task::block_in_place(|| {
            store.events(session.id, known as u64, session.pending.len())
        })
        .map_err(|e| fail("events", e))?;
        prop_assert_eq!(
            stored.len(),
            session.pending.len(),
            "events missing from redb"
        );
        for (event, kind) in stored.iter().zip(session.pending.drain(..)) {
            session.events.push((event.id, event.seq, kind));
        }
        Ok(())
    }

    /// Learns the ids of a session's pending events from its observer, which
    /// must receive exactly them, in seq order, and nothing more (but for
    /// events the model learned from redb before the observer subscribed).
    async fn learn_from_hub(session: &mut ModelSession) -> Result<(), TestCaseError> {
        let Some(observer) = &mut session.observer else {
            return Ok(());
        };
        let mut published = Vec::new();
        // Wait for the last pending event (publishing may follow the ack).
        let last = (session.events.len() + session.pending.len()) as u64;
        while !session.pending.is_empty()
            && published
                .last()
                .is_none_or(|e: &StoredEvent| e.seq + 1 < last)
        {
            match tokio::time::timeout(DEADLINE, observer.rx.recv()).await {
                Ok(Ok(event)) => published.push(event),
                Ok(Err(e)) => return Err(fail("observer", e)),
                Err(_) => break,
            }
        }
        loop {
            match observer.rx.try_recv() {
                Ok(event) => published.push(event),
                Err(TryRecvError::Empty) => break,
                Err(e) => return Err(fail("observer", e)),
            }
        }
        let first = session.events.len() as u64;
        for event in published.iter().filter(|e| e.seq < first) {
            prop_assert_eq!(
                Some(event.id),
                session.events.get(event.seq as usize).map(|e| e.0)
            );
        }
        published.retain(|e| e.seq >= first);
        let expected: Vec<_> = session
            .pending
            .iter()
            .enumerate()
            .map(|(i, kind)| (first + i as u64, kind.as_str()))
            .collect();
        let got: Vec<_> = published.iter().map(|e| (e.seq, e.event_type())).collect();
        prop_assert_eq!(got, expected, "published events of session {}", session.id);
        for (event, kind) in published.iter().zip(session.pending.drain(..)) {
            session.events.push((event.id, event.seq, kind));
        }
        Ok(())
    }

    /// Redb holds exactly the model: ids, seqs 0.. without gaps, types, and
    /// each envelope agrees with its key; event ids are unique and resolve to
    /// their (session, seq) — every id when `all`, else the new ones.
    async fn check(&mut self, all: bool) -> Result<(), TestCaseError> {
        let mut sessions = std::mem::take(&mut self.sessions);
        let mut result = Ok(());
        for session in &mut sessions {
            result = self.check_session(session, all).await;
            if result.is_err() {
                break;
            }
        }
        self.sessions = sessions;
        result
    }

    async fn check_session(
        &mut self,
        session: &mut ModelSession,
        all: bool,
    ) -> Result<(), TestCaseError> {
        let learned_from = session.events.len();
        Self::learn_from_hub(session).await?;
        self.learn_from_store(session)?;
        let store = self.store()?;
        let stored = tokio::task::block_in_place(|| store.events(session.id, 0, usize::MAX))
            .map_err(|e| fail("events", e))?;
        let got: Vec<_> = stored
            .iter()
            .map(|e| (e.id, e.seq, e.event_type().to_string()))
            .collect();
        prop_assert_eq!(&got, &session.events, "journal of session {}", session.id);
        let checked_from = if all { 0 } else { learned_from };
        for (i, event) in stored.iter().enumerate().skip(checked_from) {
            prop_assert_eq!(event.seq, i as u64, "seqs must be 0, 1, 2, ...");
            let envelope: Value =
                serde_json::from_str(&event.json).map_err(|e| fail("envelope is not JSON", e))?;
            prop_assert_eq!(&envelope["id"], &json!(event.id));
            prop_assert_eq!(&envelope["seq"], &json!(event.seq));
            prop_assert_eq!(&envelope["session_id"], &json!(session.id));
            prop_assert_eq!(&envelope["type"], &json!(session.events[i].2));
            let position = tokio::task::block_in_place(|| store.event_seq(session.id, event.id))
                .map_err(|e| fail("event_seq", e))?;
            prop_assert_eq!(position, Some(event.seq), "position of event {}", event.id);
        }
        for (id, _, _) in &session.events[learned_from..] {
            prop_assert!(self.ids.insert(*id), "event id {} is not unique", id);
        }
        Ok(())
    }
}

fn run_case(
    engine: Engine,
    sessions: usize,
    observe: bool,
    tiny_cache: bool,
    ops: &[Op],
) -> Result<Stats, TestCaseError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail("runtime", e))?;
    let dir = tempfile::tempdir().map_err(|e| fail("tempdir", e))?;
    let backend = match engine {
        Engine::Redb => Backend::Redb(dir.path().join("db.redb")),
        Engine::Postgres => Backend::Postgres(pg_cluster::database(&format!(
            "model_{}",
            Uuid::now_v7().simple()
        ))),
    };
    runtime.block_on(async {
        let mut harness = Harness::start(backend, sessions, observe, tiny_cache).await?;
        for op in ops {
            harness.apply(op).await?;
        }
        Ok(harness.stats)
    })
}

#[derive(Clone, Copy, Debug)]
enum Engine {
    Redb,
    Postgres,
}

/// The property: whatever the interleaving of appends, reconnections and
/// restarts, the engine holds exactly the model and every stream delivers
/// exactly the model's events after its cursor, in order, once each.
fn journal_matches_its_model(engine: Engine, default_cases: u32) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        max_shrink_iters: 256,
        source_file: Some(file!()),
        ..ProptestConfig::default()
    });
    let total = Mutex::new(Stats::default());
    let result = runner.run(&case(), |(sessions, observe, tiny_cache, ops)| {
        let stats = run_case(engine, sessions, observe, tiny_cache, &ops)?;
        total
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(&stats);
        Ok(())
    });
    if let Err(err) = result {
        panic!("{err}");
    }
    let total = total
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    println!("journal model ({engine:?}): {total:?}");
    if cases >= 12 {
        // The run must have exercised both halves of the stream.
        assert!(total.replayed > 0 && total.tailed > 0, "{total:?}");
    }
}

#[test]
fn the_journal_matches_its_model_through_appends_reconnects_and_restarts() {
    journal_matches_its_model(Engine::Redb, 24);
}

/// The same property on PostgreSQL (fewer cases by default: each restart
/// is a new host with new connections).
#[test]
fn on_postgres_the_journal_matches_its_model_through_appends_reconnects_and_restarts() {
    journal_matches_its_model(Engine::Postgres, 12);
}

/// A reader that falls more than the hub's capacity behind gets `Lagged`,
/// re-reads redb, and still delivers every event exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_reader_catches_up_from_redb() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = Harness::start(Backend::Redb(dir.path().join("db.redb")), 1, false, false)
        .await
        .unwrap();
    let (id, from) = (harness.sessions[0].id, 2);
    let until = (harness.sessions[0].events.len() + LAG_BURST) as u64;
    let (replayed, replayed_rx) = oneshot::channel();
    let (resume_tx, resume) = oneshot::channel();
    let reader = tokio::spawn(stream(
        harness.store().unwrap().clone(),
        id,
        from,
        until,
        3,
        false,
        Some(Pause { replayed, resume }),
    ));
    replayed_rx.await.unwrap();
    // Tells when the burst is all in the hub (publishing may follow the ack).
    let mut watch = harness.store().unwrap().hub().subscribe(id);
    let mut acks = Vec::new();
    for _ in 0..LAG_BURST / 20 {
        acks.push(
            harness
                .send(0, &[EventType::MessageDelta; 20])
                .await
                .unwrap(),
        );
    }
    Harness::acknowledged(acks).await.unwrap();
    loop {
        match tokio::time::timeout(DEADLINE, watch.rx.recv())
            .await
            .unwrap()
        {
            Ok(event) if event.seq + 1 == until => break,
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => panic!("the hub closed the subscription"),
        }
    }
    drop(watch);
    resume_tx.send(()).unwrap();
    let (got, stats) = tokio::time::timeout(DEADLINE, reader)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    harness.check(true).await.unwrap();
    assert_eq!(stats.lags, 1, "{stats:?}");
    assert_eq!(
        got.iter().map(|e| (e.id, e.seq)).collect::<Vec<_>>(),
        harness.sessions[0].events[from as usize..]
            .iter()
            .map(|(id, seq, _)| (*id, *seq))
            .collect::<Vec<_>>()
    );
}
