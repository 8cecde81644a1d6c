//! The writer starts the turns it commits (`start.rs`), on redb and on
//! PostgreSQL: on redb once, before the session is committed, with a
//! `Committed` that resolves after it; on PostgreSQL (which may apply a
//! batch twice) once, after the commit and before the answer. A rejected
//! command or an idempotent retry starts nothing; a turn whose commit
//! failed can write nothing; turns committed before the sink is given
//! (the recovery at start) wait for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use uuid::Uuid;

use super::idempotency_tests::{Backend, key, start};
use super::outbox::Outbox;
use super::tests::{FailingBackend, new_deployment, success};
use super::*;
use crate::store::By;
use crate::store::test_calls::HostCalls;

/// What a sink saw: the turn's session, whether it came with a
/// `Committed`, and whether the session was committed when it started.
type Seen = Arc<Mutex<Vec<(Uuid, Option<Committed>, bool)>>>;

/// A sink that records each start (called on the writer's thread, or by
/// `start_turns` for the turns that waited).
struct Recording {
    store: Db,
    seen: Seen,
}

impl TurnSink for Recording {
    fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
        let id = ticket.session_id;
        let visible = self.store.session(id).unwrap().is_some();
        self.seen.lock().unwrap().push((id, committed, visible));
    }
}

fn recording(store: &Db, seen: &Seen) -> Arc<dyn TurnSink> {
    Arc::new(Recording {
        store: store.clone(),
        seen: seen.clone(),
    })
}

/// A sink that sends what it gets.
struct Sending(Mutex<std::sync::mpsc::Sender<(TurnTicket, Option<Committed>)>>);

impl TurnSink for Sending {
    fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
        self.0.lock().unwrap().send((ticket, committed)).unwrap();
    }
}

fn taken(seen: &Seen) -> Vec<(Uuid, Option<Committed>, bool)> {
    std::mem::take(&mut *seen.lock().unwrap())
}

async fn turns_start_once(backend: Backend, early: bool) {
    let (store, writer) = start(&backend).await;
    let seen: Seen = Arc::default();
    writer.start_turns(recording(&store, &seen));
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();

    // The same request twice (one idempotency key).
    let create = || {
        let (app, route) = ("app".into(), "/chat".into());
        writer.create_session(app, route, json!("hi"), By::host(), key("k1", "s-1", "f1"))
    };
    let done = create().await.unwrap();
    let id = done.answer.id;
    let started = taken(&seen);
    // Started by the writer, once, before the answer.
    assert_eq!(started.len(), 1, "a turn starts once");
    let (session, committed, visible) = &started[0];
    assert_eq!(*session, id);
    if early {
        assert!(!visible, "an early start runs before the commit");
        let committed = committed
            .clone()
            .expect("an early start waits for its commit");
        committed.wait().await.unwrap();
        assert!(store.session(id).unwrap().is_some());
    } else {
        assert!(
            committed.is_none() && *visible,
            "on this engine a turn starts once committed"
        );
    }

    // A retry of the same request starts nothing: it did no work.
    let retry = create().await.unwrap();
    assert!(retry.work.is_none());
    // A refused input (the turn still runs) starts nothing either.
    let refused = writer
        .input(id, json!("more"), By::host(), OnBusy::Reject, None)
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))));
    assert!(taken(&seen).is_empty());

    // An input's turn starts the same way.
    writer
        .finish_turn(id, 1, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let done = writer
        .input(id, json!("more"), By::host(), OnBusy::Reject, None)
        .await
        .unwrap();
    assert!(matches!(done.work, Some(InputOutcome::Started(t)) if t.turn == 2));
    let started = taken(&seen);
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].1.is_some(), early);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redb_a_turn_starts_once_before_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    turns_start_once(Backend::Redb(dir.path().join("db.redb")), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_turn_starts_once_after_its_commit() {
    let name = format!("start_{}", Uuid::now_v7().simple());
    let url = tokio::task::block_in_place(|| super::pg_cluster::database(&name));
    turns_start_once(Backend::Postgres(url), false).await;
}

/// On PostgreSQL a command whose data the database cannot store (a guest's
/// tool-call arguments holding a NUL, which `jsonb` refuses; a thread id
/// holding one, which `text` refuses) fails alone:
/// the commands that shared its batch are applied again one by one and
/// commit, and only its own caller sees the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_command_the_database_cannot_store_fails_alone() {
    let name = format!("alone_{}", Uuid::now_v7().simple());
    let url = tokio::task::block_in_place(|| super::pg_cluster::database(&name));
    let (_store, writer) = start(&Backend::Postgres(url)).await;
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let mut sessions = Vec::new();
    for _ in 0..24 {
        let (session, _) = writer
            .new_session("app".into(), "/chat".into(), json!("hi"))
            .await
            .unwrap();
        sessions.push(session.id);
    }
    // Every turn suspends on a gated call at once (so they share batches);
    // one call's arguments hold a NUL.
    const BAD: usize = 12;
    let suspends = sessions.iter().enumerate().map(|(i, id)| {
        let text = if i == BAD {
            "a\u{0}b".to_string()
        } else {
            format!("ok {i}")
        };
        let call = ToolCallRecord {
            tool_call_id: format!("call-{i}"),
            name: "refund".into(),
            arguments: json!({ "note": text }),
        };
        let pending = PendingApproval {
            call: call.clone(),
            reason: None,
            gated_by: vec!["code".into()],
            step: vec![call],
            input: json!("hi"),
            event_seq: 0,
            expires_at: None,
        };
        let writer = writer.clone();
        let id = *id;
        async move {
            writer
                .finish_turn(id, 1, vec![], TurnOutcome::Suspended(Box::new(pending)))
                .await
        }
    });
    // And a command whose bad text is written while it is applied (an
    // AG-UI thread id), which aborts the transaction mid-batch.
    let thread = writer.open_thread(
        "app".into(),
        "/chat".into(),
        "thread\u{0}1".into(),
        json!("hi"),
        By::host(),
    );
    let (results, thread) = tokio::join!(futures::future::join_all(suspends), thread);
    assert!(
        matches!(thread, Err(StoreError::Unstorable(_))),
        "{:?}",
        thread.err()
    );
    for (i, result) in results.iter().enumerate() {
        if i == BAD {
            assert!(
                matches!(result, Err(StoreError::Unstorable(_))),
                "{result:?}"
            );
        } else {
            assert!(
                result.is_ok(),
                "session {i} failed beside the bad one: {result:?}"
            );
        }
    }
}

/// A host's writer keeps the turns it commits before the runtime exists
/// (the recovery at start) and starts them, once, when given the sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_committed_before_the_sink_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Db::open(&dir.path().join("db.redb")).unwrap();
    let redact: CurrentRedactor = Arc::new(|| crate::redact::Redactor::new(vec![]));
    let first = Writer::spawn_for_host(
        store.clone(),
        Uuid::now_v7(),
        redact.clone(),
        Quotas::default(),
    )
    .unwrap();
    let d = first.create_deployment(new_deployment(None)).await.unwrap();
    first.finish_build(d.id, success()).await.unwrap();
    let (session, _) = first
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    // The process dies before its runtime started the turn.
    drop(first);
    let boot = Uuid::now_v7();
    let writer = Writer::spawn_for_host(store.clone(), boot, redact, Quotas::default()).unwrap();
    let recovery = writer.recover().await.unwrap();
    assert_eq!(recovery.restarted.len(), 1);
    assert_eq!(
        store.session(session.id).unwrap().unwrap().boot_id,
        Some(boot)
    );
    let seen: Seen = Arc::default();
    writer.start_turns(recording(&store, &seen));
    let started = taken(&seen);
    assert_eq!(started.len(), 1, "the waiting turn starts once");
    assert_eq!(started[0].0, session.id);
    assert!(started[0].2, "it was committed");
    // A recovery that finds nothing starts nothing more.
    assert!(writer.recover().await.unwrap().restarted.is_empty());
    assert!(taken(&seen).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_started_before_a_failed_commit_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.path().join("db.redb"))
        .unwrap();
    let fail = Arc::new(AtomicBool::new(false));
    let backend = FailingBackend {
        inner: ::redb::backends::FileBackend::new(file).unwrap(),
        fail: fail.clone(),
    };
    let store = Db::new(redb::RedbEngine::open_with_backend(backend).unwrap());
    let writer = Writer::spawn(store.clone()).unwrap();
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();

    // The disk fails between the turn's start and the session's commit.
    let (tx, rx) = std::sync::mpsc::channel();
    struct Failing(Arc<AtomicBool>, Sending);
    impl TurnSink for Failing {
        fn start(&self, ticket: TurnTicket, committed: Option<Committed>) {
            self.0.store(true, Ordering::Relaxed);
            self.1.start(ticket, committed);
        }
    }
    writer.start_turns(Arc::new(Failing(fail, Sending(Mutex::new(tx)))));
    let created = writer
        .create_session("app".into(), "/chat".into(), json!("hi"), By::host(), None)
        .await;
    assert!(matches!(created, Err(StoreError::Storage(_))));
    let (ticket, committed) = rx.recv().unwrap();
    let committed = committed.expect("started early");
    assert!(matches!(
        committed.wait().await,
        Err(StoreError::Storage(_))
    ));
    // What the turn does next fails, and its session never existed.
    let outbox = Arc::new(Outbox::after(
        ticket.session_id,
        ticket.turn,
        Some(committed),
    ));
    let delta = crate::journal::NewEvent::untyped(
        crate::journal::EventType::MessageStart,
        json!({"message_id": "m", "role": "assistant"}),
    );
    let ack = writer.append(&outbox, vec![delta]).await.unwrap();
    assert!(matches!(ack.await.unwrap(), Err(StoreError::Storage(_))));
    assert!(store.session(ticket.session_id).unwrap().is_none());
    assert!(store.events(ticket.session_id, 0, 10).unwrap().is_empty());
}
