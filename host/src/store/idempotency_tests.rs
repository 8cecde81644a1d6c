//! Idempotency keys at the domain level, on redb and on PostgreSQL: a
//! retry answers the first answer and does no work, across a restart; a
//! reused key is refused; keys are per API key; an expired key (purged
//! with a clock a day ahead) is new again.

use std::time::{Duration, SystemTime};

use serde_json::json;
use uuid::Uuid;

use super::postgres::{LeaseOptions, PgEngine};
use super::records::ToolCallRecord;
use super::tests::{new_deployment, success, suspend};
use super::*;

use crate::store::By;

#[derive(Clone)]
pub(crate) enum Backend {
    Redb(std::path::PathBuf),
    Postgres(String),
}

fn open(backend: &Backend) -> Result<Db, StoreError> {
    match backend {
        Backend::Redb(path) => Db::open(path),
        Backend::Postgres(url) => tokio::task::block_in_place(|| {
            PgEngine::open(url, Uuid::now_v7(), LeaseOptions::default()).map(Db::new)
        }),
    }
}

/// A store and its writer; reopening waits until the previous writer let go.
pub(crate) async fn start(backend: &Backend) -> (Db, WriterHandle) {
    let mut store = open(backend);
    for _ in 0..500 {
        if store.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        store = open(backend);
    }
    let store = store.unwrap();
    let writer = Writer::spawn(store.clone()).unwrap();
    (store, writer)
}

pub(super) fn key(key_id: &str, key: &str, fingerprint: &str) -> Option<Idempotency> {
    Some(Idempotency {
        key_id: key_id.into(),
        key: key.into(),
        fingerprint: fingerprint.into(),
    })
}

async fn sessions(store: &Db) -> usize {
    let filter = SessionFilter {
        limit: 100,
        ..SessionFilter::default()
    };
    let sessions = store.read(move |s| s.sessions(&filter)).await;
    sessions.unwrap().len()
}

async fn turns_started(store: &Db, session: Uuid) -> usize {
    let events = store.read(move |s| s.events(session, 0, 1000)).await;
    (events.unwrap().iter())
        .filter(|e| e.json.contains("\"type\":\"TURN_STARTED\""))
        .count()
}

async fn retries_answer_the_first_answer(backend: Backend) {
    let (store, writer) = start(&backend).await;
    let d = writer
        .create_deployment_once(new_deployment(None), key("k1", "deploy-1", "fd"))
        .await
        .unwrap();
    let again = writer
        .create_deployment_once(new_deployment(None), key("k1", "deploy-1", "fd"))
        .await
        .unwrap();
    assert!(d.work.is_some() && again.work.is_none());
    assert_eq!(again.answer.deployment.id, d.answer.deployment.id);
    assert_eq!(again.answer.deployment.version, 1);
    let app = d.answer.app.id;
    let rows = store.read(move |s| s.deployments(app)).await.unwrap();
    assert_eq!(rows.len(), 1);
    writer
        .finish_build(d.answer.deployment.id, success())
        .await
        .unwrap();

    let create = || {
        writer.create_session(
            "app".into(),
            "/chat".into(),
            json!("hi"),
            By::host(),
            key("k1", "s-1", "f1"),
        )
    };
    let first = create().await.unwrap();
    let (record, ticket) = first.work.clone().unwrap();
    let retry = create().await.unwrap();
    assert!(retry.work.is_none(), "a retry does no work");
    assert_eq!(retry.answer.id, record.id);
    assert_eq!(retry.answer.created_at, record.created_at);
    assert_eq!(sessions(&store).await, 1);

    // Same key, another body or another command: refused; nothing done.
    let other_body = writer
        .create_session(
            "app".into(),
            "/chat".into(),
            json!("bye"),
            By::host(),
            key("k1", "s-1", "f2"),
        )
        .await;
    assert!(matches!(other_body, Err(StoreError::KeyReused(_))));
    let other_command = writer
        .input(
            record.id,
            json!("hi"),
            By::host(),
            OnBusy::Reject,
            key("k1", "s-1", "f1"),
        )
        .await;
    assert!(matches!(other_command, Err(StoreError::KeyReused(_))));
    assert_eq!(sessions(&store).await, 1);
    // Keys are per API key: another key's `s-1` is new.
    let theirs = writer
        .create_session(
            "app".into(),
            "/chat".into(),
            json!("hi"),
            By::host(),
            key("k2", "s-1", "f1"),
        )
        .await
        .unwrap();
    assert_ne!(theirs.answer.id, record.id);
    assert_eq!(sessions(&store).await, 2);
    let (theirs, their_ticket) = theirs.work.unwrap();

    // An input: one turn, whatever the retries.
    writer
        .finish_turn(record.id, ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let input = || {
        writer.input(
            record.id,
            json!("more"),
            By::host(),
            OnBusy::Reject,
            key("k1", "i-1", "fi"),
        )
    };
    let sent = input().await.unwrap();
    assert!(sent.work.is_some());
    let resent = input().await.unwrap();
    assert!(resent.work.is_none());
    assert_eq!(resent.answer, sent.answer);
    assert_eq!(sent.answer.turn, 2);
    assert_eq!(turns_started(&store, record.id).await, 2);

    // A decision: journaled once.
    let call = ToolCallRecord {
        tool_call_id: "call_1".into(),
        name: "refund".into(),
        arguments: json!({}),
    };
    suspend(&writer, theirs.id, their_ticket.turn, call, json!("hi")).await;
    let decision = Decision {
        approved: true,
        approver: "ops".into(),
        by: By::Platform {
            key_id: "k2".into(),
        },
        details: Default::default(),
        checked_seq: None,
    };
    let decide = || writer.decide(theirs.id, decision.clone(), key("k2", "d-1", "fx"));
    let decided = decide().await.unwrap();
    let redecided = decide().await.unwrap();
    assert!(decided.work.is_some() && redecided.work.is_none());
    assert_eq!(redecided.answer, decided.answer);
    assert_eq!(decided.answer.tool_call_id, "call_1");
    assert_eq!(turns_started(&store, theirs.id).await, 2);

    // After a restart (on PostgreSQL: another host), the same answers.
    drop(writer);
    drop(store);
    let (store, writer) = start(&backend).await;
    let after = writer
        .create_session(
            "app".into(),
            "/chat".into(),
            json!("hi"),
            By::host(),
            key("k1", "s-1", "f1"),
        )
        .await
        .unwrap();
    assert!(after.work.is_none());
    assert_eq!(after.answer.id, record.id);
    let redeployed = writer
        .create_deployment_once(new_deployment(None), key("k1", "deploy-1", "fd"))
        .await
        .unwrap();
    assert_eq!(redeployed.answer.deployment.id, d.answer.deployment.id);
    assert_eq!(sessions(&store).await, 2);

    // Purged with a clock a day ahead (not before): the key is new again.
    let now = unix_ms(SystemTime::now());
    let hour = 3_600_000;
    assert_eq!(writer.purge_idempotency(now + hour, 100).await.unwrap(), 0);
    let day = IDEMPOTENCY_TTL.as_millis() as u64;
    assert_eq!(
        writer.purge_idempotency(now + day + hour, 2).await.unwrap(),
        2,
        "a purge forgets at most its limit"
    );
    assert_eq!(
        writer
            .purge_idempotency(now + day + hour, 100)
            .await
            .unwrap(),
        3
    );
    let fresh = writer
        .create_session(
            "app".into(),
            "/chat".into(),
            json!("bye"),
            By::host(),
            key("k1", "s-1", "f2"),
        )
        .await
        .unwrap();
    assert!(fresh.work.is_some());
    assert_ne!(fresh.answer.id, record.id);
    assert_eq!(sessions(&store).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redb_a_retry_gets_the_first_answer_until_its_key_expires() {
    let dir = tempfile::tempdir().unwrap();
    retries_answer_the_first_answer(Backend::Redb(dir.path().join("db.redb"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_retry_gets_the_first_answer_until_its_key_expires() {
    let name = format!("idempotency_{}", Uuid::now_v7().simple());
    let url = tokio::task::block_in_place(|| super::pg_cluster::database(&name));
    retries_answer_the_first_answer(Backend::Postgres(url)).await;
}
