//! Turns started before their commit (`start.rs`), on redb and on
//! PostgreSQL: on redb the writer starts a new session's turn once, before
//! the session is committed, with a `Committed` that resolves after it; the
//! caller's later start does nothing; a rejected command or an idempotent
//! retry starts nothing; a turn whose commit failed can write nothing. On
//! PostgreSQL (which may apply a batch twice) nothing starts early and the
//! caller starts the turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use uuid::Uuid;

use super::idempotency_tests::{Backend, key, start};
use super::outbox::Outbox;
use super::tests::{FailingBackend, new_deployment, success};
use super::*;

/// What a starter saw: the turn's session, whether it came with a
/// `Committed`, and whether the session was committed when it started.
type Seen = Arc<Mutex<Vec<(Uuid, Option<Committed>, bool)>>>;

fn recording(store: &Db, seen: &Seen) -> Arc<Starter> {
    let (store, seen) = (store.clone(), seen.clone());
    Starter::new(move |ticket, committed| {
        // An early start runs on the writer's thread, outside the async
        // runtime; the caller's start runs on a worker.
        let id = ticket.session_id;
        let visible = tokio::task::block_in_place(|| store.session(id))
            .unwrap()
            .is_some();
        seen.lock().unwrap().push((id, committed, visible));
    })
}

fn taken(seen: &Seen) -> Vec<(Uuid, Option<Committed>, bool)> {
    std::mem::take(&mut *seen.lock().unwrap())
}

async fn turns_start_once(backend: Backend, early: bool) {
    let (store, writer) = start(&backend).await;
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let boot = Uuid::now_v7();
    let seen: Seen = Arc::default();

    // The same request twice (one idempotency key).
    let create = |starter: Arc<Starter>| {
        let writer = writer.clone();
        async move {
            let (app, route) = ("app".into(), "/chat".into());
            let key = key("k1", "s-1", "f1");
            (writer.create_session_once(app, route, json!("hi"), boot, None, key, Some(&starter)))
                .await
                .unwrap()
        }
    };
    let starter = recording(&store, &seen);
    let done = create(starter.clone()).await;
    let id = done.answer.id;
    let started = taken(&seen);
    if early {
        // Started by the writer, before the session was committed.
        assert_eq!(started.len(), 1);
        let (session, committed, visible) = &started[0];
        assert_eq!(*session, id);
        assert!(!visible, "an early start runs before the commit");
        let committed = committed
            .clone()
            .expect("an early start waits for its commit");
        committed.wait().await.unwrap();
        assert!(store.session(id).unwrap().is_some());
    } else {
        assert!(started.is_empty(), "nothing starts early on this engine");
    }
    // The caller starts the turn once it is answered: only if the writer did not.
    let (_, ticket) = done.work.unwrap();
    starter.start(ticket, None);
    let started = taken(&seen);
    if early {
        assert!(started.is_empty(), "a turn starts once");
    } else {
        assert_eq!(started.len(), 1);
        let (session, committed, visible) = &started[0];
        assert_eq!(*session, id);
        assert!(committed.is_none() && *visible);
    }

    // A retry of the same request starts nothing: it did no work.
    let again = recording(&store, &seen);
    let retry = create(again.clone()).await;
    assert!(retry.work.is_none());
    // A refused input (the turn still runs) starts nothing either.
    let refused = writer
        .post_input_once(id, json!("more"), boot, None, Some(&again))
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))));
    assert!(taken(&seen).is_empty());

    // An input's turn starts the same way.
    writer
        .finish_turn(id, 1, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let input = recording(&store, &seen);
    let done = writer
        .post_input_once(id, json!("more"), boot, None, Some(&input))
        .await
        .unwrap();
    input.start(done.work.unwrap(), None);
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
    let starter = Starter::new(move |ticket, committed| {
        fail.store(true, Ordering::Relaxed);
        tx.send((ticket, committed)).unwrap();
    });
    let boot = Uuid::now_v7();
    let created = writer
        .create_session_once(
            "app".into(),
            "/chat".into(),
            json!("hi"),
            boot,
            None,
            None,
            Some(&starter),
        )
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
