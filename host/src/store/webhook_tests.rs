//! Webhook deliveries at the store: recorded by the writer in the commit
//! of the event behind them, for the endpoints that want it (event type,
//! app, not disabled) and only for events that were committed; a claim
//! holds a delivery until its attempt is recorded; finished ones purged by
//! age. On redb and on PostgreSQL.

use serde_json::{Value, json};
use uuid::Uuid;

use super::tests::{new_deployment, success};
use super::*;
use crate::journal::NewEvent;
use crate::journal::payloads::TurnEnded;

use super::idempotency_tests::{Backend, start};
use crate::store::test_calls::HostCalls;

/// Both engines: a temp redb file (kept in the returned dir), a fresh database.
fn backends() -> Vec<(Option<tempfile::TempDir>, Backend)> {
    let dir = tempfile::tempdir().unwrap();
    let redb = Backend::Redb(dir.path().join("db.redb"));
    let name = format!("webhooks_{}", Uuid::now_v7().simple());
    let url = tokio::task::block_in_place(|| super::pg_cluster::database(&name));
    vec![(Some(dir), redb), (None, Backend::Postgres(url))]
}

/// A read of the store (PostgreSQL's client blocks).
fn read<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn endpoint(events: &[&str], app: Option<&str>) -> WebhookRecord {
    let id = Uuid::now_v7();
    WebhookRecord {
        id,
        url: "https://example.com/hook".into(),
        events: events.iter().map(|e| e.to_string()).collect(),
        app_id: None,
        app: app.map(str::to_string),
        decision_links: false,
        secret: SecretRecord {
            name: format!("webhook:{id}"),
            nonce: String::new(),
            ciphertext: String::new(),
            created_at: String::new(),
            updated_at: String::new(),
        },
        previous: None,
        previous_until_ms: None,
        link_generation: 0,
        disabled: None,
        created_at: String::new(),
        key_id: "k".into(),
    }
}

fn payload(delivery: &DeliveryRecord) -> Value {
    serde_json::from_str(&delivery.payload).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_recorded_with_their_event_for_the_endpoints_that_want_it() {
    for (_dir, backend) in backends() {
        recorded_with_their_event(backend).await;
    }
}

async fn recorded_with_their_event(backend: Backend) {
    let (store, writer) = start(&backend).await;
    let every = writer
        .create_webhook(endpoint(&["turn.ended"], None))
        .await
        .unwrap();
    let builds = (writer.create_webhook(endpoint(&["deployment.succeeded"], None)))
        .await
        .unwrap();
    let mut gone = endpoint(&["turn.ended", "deployment.succeeded"], None);
    gone.disabled = Some("410".into());
    let gone = writer.create_webhook(gone).await.unwrap();
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    // An endpoint of another app, made once the app exists.
    let app_only = writer
        .create_webhook(endpoint(&["turn.ended"], Some("app")))
        .await
        .unwrap();
    assert!(app_only.app_id.is_some());

    let (session, _) = (writer.new_session("app".into(), "/chat".into(), json!("hi")))
        .await
        .unwrap();
    let ended = NewEvent::of(&TurnEnded { turn: 1 });
    (writer.finish_turn(session.id, 1, vec![ended.clone()], TurnOutcome::Ended))
        .await
        .unwrap();
    // A refused command journals nothing, and nothing is delivered for it.
    assert!(
        (writer.finish_turn(session.id, 1, vec![ended], TurnOutcome::Ended))
            .await
            .is_err()
    );

    let of = |id: Uuid| read(|| store.deliveries(id, None, 100).unwrap());
    let turns = of(every.id);
    assert_eq!(turns.len(), 1);
    let body = payload(&turns[0]);
    assert_eq!(body["type"], "turn.ended");
    assert_eq!(body["data"]["session_id"], json!(session.id));
    assert_eq!(body["data"]["turn"], 1);
    assert_eq!(turns[0].state, DeliveryState::Pending);
    assert_eq!(of(app_only.id).len(), 1);
    let built = of(builds.id);
    assert_eq!(built.len(), 1);
    assert_eq!(payload(&built[0])["data"]["deployment_id"], json!(d.id));
    assert!(of(gone.id).is_empty(), "a disabled endpoint gets nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_holds_a_delivery_until_its_attempt_is_recorded() {
    for (_dir, backend) in backends() {
        claims_and_purges(backend).await;
    }
}

async fn claims_and_purges(backend: Backend) {
    let (store, writer) = start(&backend).await;
    let hook = writer
        .create_webhook(endpoint(&["deployment.succeeded"], None))
        .await
        .unwrap();
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let now = unix_ms(std::time::SystemTime::now()) + 1;
    let due = read(|| store.due_deliveries(now, 10).unwrap());
    assert_eq!(due.len(), 1);
    let ids = vec![due[0].id];
    let claimed = writer
        .claim_deliveries(ids.clone(), now, now + 60_000)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].1.id, hook.id);
    // Held: neither due nor claimable again.
    assert!(read(|| store.due_deliveries(now, 10).unwrap()).is_empty());
    assert!(
        writer
            .claim_deliveries(ids.clone(), now, now + 60_000)
            .await
            .unwrap()
            .is_empty()
    );
    let attempt = DeliveryAttempt {
        at: now_rfc3339(),
        status: Some(500),
        error: None,
        body: None,
    };
    let retry = AttemptOutcome::Retry(now + 1000);
    writer
        .finish_attempt(ids[0], attempt.clone(), retry)
        .await
        .unwrap();
    assert!(
        read(|| store.due_deliveries(now, 10).unwrap()).is_empty(),
        "not yet"
    );
    let later = read(|| store.due_deliveries(now + 1000, 10).unwrap());
    assert_eq!((later.len(), later[0].attempt_count), (1, 1));
    // Its lease released (a restart of the one host), it is claimable at once.
    writer
        .claim_deliveries(ids.clone(), now + 1000, now + 60_000)
        .await
        .unwrap();
    assert_eq!(writer.release_deliveries(ids.clone()).await.unwrap(), 1);
    let gone = AttemptOutcome::Gone;
    let claimed = writer
        .claim_deliveries(ids.clone(), now + 1000, now + 60_000)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    writer.finish_attempt(ids[0], attempt, gone).await.unwrap();
    let stored = read(|| store.deliveries(hook.id, None, 10).unwrap());
    assert_eq!(
        (stored[0].state, stored[0].attempt_count),
        (DeliveryState::Failed, 2)
    );
    let hooks = read(|| store.webhooks().unwrap());
    assert!(hooks[0].disabled.is_some(), "a 410 disables the endpoint");

    // Finished deliveries are purged by age, pending ones kept.
    let pending = (writer.create_webhook(endpoint(&["deployment.succeeded"], None)))
        .await
        .unwrap();
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    assert_eq!(
        writer.purge_deliveries(0, 10).await.unwrap(),
        0,
        "none that old"
    );
    let later = unix_ms(std::time::SystemTime::now()) + 1;
    assert_eq!(writer.purge_deliveries(later, 10).await.unwrap(), 1);
    assert!(read(|| store.deliveries(hook.id, None, 10).unwrap()).is_empty());
    assert_eq!(
        read(|| store.deliveries(pending.id, None, 10).unwrap()).len(),
        1
    );
}
