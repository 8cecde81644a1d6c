//! Crash consistency: concurrent streaming sessions, `kill -9` at random
//! points, restarts on the same data dir. Independent SSE clients record
//! what they saw; after the last restart the journal must hold exactly
//! that (same ids and seqs), without gaps, every interrupted turn must be
//! closed (or run again), and every accepted turn must have run or failed.
//! Rounds alternate redb's commit modes on the same file (one phase, then
//! `--journal-quick-repair`), so each crash is repaired both ways.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use crate::support::hold::Hold;
use crate::support::{self, KEY, Read, Server};

#[derive(Default)]
pub(crate) struct Seen {
    /// event id → (session, seq), as some client received it.
    pub(crate) events: HashMap<String, (String, u64)>,
    /// session → turn numbers the server accepted (201/202).
    pub(crate) accepted: HashMap<String, Vec<u64>>,
    /// Streams that skipped or repeated a seq.
    pub(crate) broken_streams: Vec<String>,
    /// What a client met while its host was not being killed: an
    /// unexpected status, a failed request, a stream that ended, broke or
    /// went silent. Each is a failure of a healthy server.
    pub(crate) unexpected: Vec<String>,
}

/// One host as its clients see it. `dying` is set just before the test
/// kills it: from then on a failure is the kill, before it a defect.
/// `stop` asks the clients to start no new turn; `mid_turn` counts the
/// clients of the host streaming a turn that has started and not ended.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) dying: Arc<AtomicBool>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) mid_turn: Arc<AtomicUsize>,
}

impl Target {
    pub(crate) fn new(url: &str) -> Target {
        Target {
            url: url.to_string(),
            dying: Arc::default(),
            stop: Arc::default(),
            mid_turn: Arc::default(),
        }
    }

    /// Waits (at most 30 s) until one of the host's clients is streaming a
    /// turn, so that the kill that follows lands mid-turn.
    pub(crate) async fn wait_mid_turn(&self) {
        let started = Instant::now();
        while self.mid_turn.load(Ordering::SeqCst) == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no client of {} got a turn running",
                self.url
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// One client: a session of its own, turns one after another until
/// `target.stop`, each streamed to its end; stops at the first failure.
/// A failure while the host is not `dying` is recorded in `unexpected`.
pub(crate) async fn client(
    target: Target,
    seen: Arc<Mutex<Seen>>,
    session: Option<String>,
) -> Option<String> {
    let mut run = Run {
        http: support::client(),
        target,
        seen,
        session,
        first_request: true,
    };
    run.turns().await;
    run.session
}

struct Run {
    http: reqwest::Client,
    target: Target,
    seen: Arc<Mutex<Seen>>,
    session: Option<String>,
    /// The next request is this run's first: a session left running by the
    /// previous round (a turn recovered after the restart, or one whose
    /// host died) may answer 409 until it settles.
    first_request: bool,
}

/// How long a healthy stream may stay silent mid-turn (a taken-over turn
/// waits for its dead host's lease, 2 s in the tests).
const SILENCE: Duration = Duration::from_secs(20);

impl Run {
    /// Records `what` unless the host is being killed.
    fn fail(&self, what: String) {
        if !self.target.dying.load(Ordering::SeqCst) {
            let what = format!("{}: {what}", self.target.url);
            self.seen.lock().unwrap().unexpected.push(what);
        }
    }

    async fn turns(&mut self) {
        let words: Vec<String> = (0..rand::rng().random_range(50..400))
            .map(|i| format!("w{i}"))
            .collect();
        let input = json!(words.join(" "));
        while !self.target.stop.load(Ordering::SeqCst) {
            let Some((id, turn)) = self.start(&input).await else {
                return;
            };
            (self.seen.lock().unwrap().accepted)
                .entry(id.clone())
                .or_default()
                .push(turn);
            self.session = Some(id.clone());
            if !self.stream(&id, turn).await {
                return;
            }
        }
    }

    /// POST and the status and body (`None`, recorded, on a failure).
    async fn post(&self, path: &str, body: &Value) -> Option<(u16, Value)> {
        let url = format!("{}{path}", self.target.url);
        let response = match self
            .http
            .post(&url)
            .bearer_auth(KEY)
            .json(body)
            .send()
            .await
        {
            Ok(response) => response,
            Err(err) => {
                self.fail(format!("POST {path}: {err}"));
                return None;
            }
        };
        let status = response.status().as_u16();
        match response.json().await {
            Ok(body) => Some((status, body)),
            Err(err) => {
                self.fail(format!("POST {path} answered {status}, no JSON: {err}"));
                None
            }
        }
    }

    /// Starts a turn (a new session, or input to ours): (session, turn).
    async fn start(&mut self, input: &Value) -> Option<(String, u64)> {
        let first = std::mem::take(&mut self.first_request);
        let Some(id) = self.session.clone() else {
            let body = json!({"app": "hello", "route": "/chat", "input": input});
            let (status, body) = self.post("/sessions", &body).await?;
            if status != 201 {
                self.fail(format!("POST /sessions: {status} {body}"));
                return None;
            }
            return Some((body["session_id"].as_str()?.to_string(), 1));
        };
        let path = format!("/sessions/{id}/input");
        let (mut status, mut body) = self.post(&path, &json!({"input": input})).await?;
        if status == 409 && first {
            self.settle(&id).await?;
            (status, body) = self.post(&path, &json!({"input": input})).await?;
        }
        if status != 202 {
            self.fail(format!("POST {path}: {status} {body}"));
            return None;
        }
        Some((id, body["turn"].as_u64()?))
    }

    /// Waits (at most 60 s) until the session's running turn is over.
    async fn settle(&self, id: &str) -> Option<()> {
        let started = Instant::now();
        loop {
            let url = format!("{}/sessions/{id}", self.target.url);
            let record: Value = match self.http.get(&url).bearer_auth(KEY).send().await {
                Ok(response) => response.json().await.unwrap_or_default(),
                Err(err) => {
                    self.fail(format!("GET /sessions/{id}: {err}"));
                    return None;
                }
            };
            if record["status"] != "running" {
                return Some(());
            }
            if started.elapsed() > Duration::from_secs(60) {
                self.fail(format!("{id} stayed running for 60 s: {record}"));
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Streams the session until `turn` ends; false on a failure.
    async fn stream(&self, id: &str, turn: u64) -> bool {
        let url = format!("{}/sessions/{id}/events", self.target.url);
        let response = match self.http.get(&url).bearer_auth(KEY).send().await {
            Ok(response) if response.status() == 200 => response,
            Ok(response) => {
                self.fail(format!("GET events of {id}: {}", response.status()));
                return false;
            }
            Err(err) => {
                self.fail(format!("GET events of {id}: {err}"));
                return false;
            }
        };
        let mut stream = support::EventStream::new(response);
        let mut previous: Option<u64> = None;
        let mut _counted = MidTurn(None);
        loop {
            let event = match stream.read(SILENCE).await {
                Read::Event(event) => event,
                other => {
                    self.fail(format!("the stream of {id}, turn {turn}: {other:?}"));
                    return false;
                }
            };
            let (Some(eid), Some(seq)) = (event["id"].as_str(), event["seq"].as_u64()) else {
                self.fail(format!("an event without id or seq: {event}"));
                return false;
            };
            if previous.is_some_and(|p| seq != p + 1) {
                (self.seen.lock().unwrap().broken_streams)
                    .push(format!("{id}: {previous:?} then {seq}"));
            }
            previous = Some(seq);
            (self.seen.lock().unwrap().events).insert(eid.to_string(), (id.to_string(), seq));
            let of_turn = event["payload"]["turn"].as_u64() == Some(turn);
            match event["type"].as_str() {
                Some("TURN_STARTED") if of_turn => {
                    _counted = MidTurn::new(self.target.mid_turn.clone());
                }
                Some("TURN_ENDED" | "TURN_ERROR") if of_turn => return true,
                _ => {}
            }
        }
    }
}

/// Counts a client in its host's `mid_turn` while it lives.
struct MidTurn(Option<Arc<AtomicUsize>>);

impl MidTurn {
    fn new(count: Arc<AtomicUsize>) -> MidTurn {
        count.fetch_add(1, Ordering::SeqCst);
        MidTurn(Some(count))
    }
}

impl Drop for MidTurn {
    fn drop(&mut self) {
        if let Some(count) = &self.0 {
            count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Waits until the session has no running turn; returns its record.
pub(crate) async fn settled(server: &Server, session: &str) -> Value {
    let mut record = Value::Null;
    for _ in 0..1200 {
        let (_, r) = server.get(&format!("/sessions/{session}")).await;
        record = r;
        if record["status"] != "running" {
            return record;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{session} never settled: {record}");
}

#[tokio::test]
async fn kill_9_at_random_points_loses_nothing_a_client_saw() {
    let dir = support::data_dir();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut sessions: Vec<Option<String>> = vec![None; 8];
    // In the last round one turn is held mid-flight (its GET waits on an
    // upstream that never answers): a kill that surely lands mid-turn,
    // whatever the random ones did.
    let held = Hold::start().await;
    let mut held_session = None;
    for round in 0..4 {
        let server = if round % 2 == 1 {
            Server::start_with(
                dir.path(),
                &["--journal-quick-repair", "--outbound-allow-private"],
            )
            .await
        } else {
            Server::start_with(dir.path(), &["--outbound-allow-private"]).await
        };
        if round == 0 {
            server.deploy("hello", &support::guest("hello")).await;
            held.deploy_fetch(&server).await;
        }
        if round == 3 {
            held_session = Some(server.session("fetch", "/fetch", held.input()).await);
            held.wait_arrived(1).await;
        }
        let target = Target::new(&server.url);
        let clients: Vec<_> = (sessions.iter().cloned())
            .map(|session| tokio::spawn(client(target.clone(), seen.clone(), session)))
            .collect();
        let pause = rand::rng().random_range(100..1200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        // Kill it while a turn runs, so that recovery has one to close.
        target.wait_mid_turn().await;
        target.dying.store(true, Ordering::SeqCst);
        target.stop.store(true, Ordering::SeqCst);
        server.kill();
        for (slot, handle) in sessions.iter_mut().zip(clients) {
            if let Some(session) = handle.await.expect("a client panicked") {
                *slot = Some(session);
            }
        }
    }

    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let (sessions, turns, interrupted) = check_survivors(&seen, &[&server]).await;
    // The held turn was running when the host died, its request journaled:
    // recovery closes it (`host_restarted`), on both engines, never re-runs it.
    let held_session = held_session.expect("the last round held a turn");
    let events = server
        .events(&held_session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    let last = events.last().expect("the held session's journal");
    assert_eq!(last["type"], "TURN_ERROR", "{events:#?}");
    assert_eq!(last["payload"]["kind"], "host_restarted", "{events:#?}");
    assert_eq!(held.arrived(), 1, "the held request was sent again");
    eprintln!(
        "crash test: {sessions} sessions, {turns} accepted turns, {interrupted} closed by a restart, {} events seen by clients",
        seen.events.len()
    );
}

/// What a crash test checks once the servers are up again, reading each
/// session through one of `readers` (round robin) and sending it input
/// through the next: (a) no client met a failure before its host's kill;
/// (b) every event a client received is in the journal with the same id
/// and seq; (c) seqs run from 0 with no gap and no stream skipped or
/// repeated one; (d) every session accepts input at once; (e) every
/// accepted turn started, and every turn started once and ended once
/// (ran, or recorded as failed); (f) at least one kill landed mid-turn (a
/// turn closed `host_restarted`). The sessions are ended, so that their
/// whole journals are read up to SESSION_ENDED.
/// Returns the sessions, the accepted turns and the turns a restart closed.
pub(crate) async fn check_survivors(seen: &Seen, readers: &[&Server]) -> (usize, usize, usize) {
    assert!(
        seen.unexpected.is_empty(),
        "failures before any kill: {:#?}",
        seen.unexpected
    );
    assert!(
        !seen.events.is_empty() && !seen.accepted.is_empty(),
        "the workload ran"
    );
    assert!(seen.broken_streams.is_empty(), "{:?}", seen.broken_streams);
    let mut journals = HashMap::new();
    for (i, session) in seen.accepted.keys().enumerate() {
        let reader = readers[i % readers.len()];
        let writer = readers[(i + 1) % readers.len()];
        settled(reader, session).await;
        let (status, body) = writer
            .post(
                &format!("/sessions/{session}/input"),
                json!({"input": "after"}),
            )
            .await;
        assert_eq!(status, 202, "{session}: {body}");
        settled(reader, session).await;
        let (status, body) = reader
            .post(&format!("/sessions/{session}/end"), json!({}))
            .await;
        assert_eq!(status, 200, "{session}: {body}");
        let mut stream = reader.events(session, None).await;
        let events = stream.rest_until_end(Duration::from_secs(30)).await;
        journals.insert(session.clone(), events);
    }
    for (session, events) in &journals {
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"], i as u64, "{session}: a gap or a duplicate");
        }
        let count = |kinds: &[&str], turn: u64| {
            (events.iter())
                .filter(|e| {
                    kinds.contains(&e["type"].as_str().unwrap_or_default())
                        && e["payload"]["turn"] == turn
                })
                .count()
        };
        for turn in &seen.accepted[session] {
            assert!(
                count(&["TURN_STARTED"], *turn) > 0,
                "{session}: accepted turn {turn} never started"
            );
        }
        let last = (events.iter())
            .filter_map(|e| e["payload"]["turn"].as_u64())
            .max()
            .expect("turns");
        for turn in 1..=last {
            assert_eq!(
                count(&["TURN_STARTED"], turn),
                1,
                "{session}: turn {turn} started more than once, or never"
            );
            assert_eq!(
                count(&["TURN_ENDED", "TURN_ERROR"], turn),
                1,
                "{session}: turn {turn} must end exactly once"
            );
        }
        assert_eq!(events.last().unwrap()["type"], "SESSION_ENDED", "{session}");
    }
    for (id, (session, seq)) in &seen.events {
        let event = &journals[session][*seq as usize];
        assert_eq!(
            event["id"],
            id.as_str(),
            "{session} seq {seq} changed identity"
        );
    }
    let interrupted = journals
        .values()
        .flatten()
        .filter(|e| e["payload"]["kind"] == "host_restarted")
        .count();
    let turns = seen.accepted.values().map(Vec::len).sum();
    (journals.len(), turns, interrupted)
}
