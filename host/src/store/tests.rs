//! Store tests against a real redb file: version assignment, the current
//! deployment rule, and the turn state machine decided by the writer.

use serde_json::json;
use uuid::Uuid;

use super::*;

fn open() -> (tempfile::TempDir, Store, WriterHandle) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db.redb")).unwrap();
    let writer = Writer::spawn(store.clone()).unwrap();
    (dir, store, writer)
}

fn new_deployment(version: Option<u64>) -> NewDeployment {
    NewDeployment {
        app_slug: "app".into(),
        version,
        manifest: String::new(),
        entry: "a.wasm".into(),
        manifest_gated: Vec::new(),
        approval_policy: Vec::new(),
        secrets: Vec::new(),
        limits: Default::default(),
    }
}

fn success() -> BuildOutcome {
    BuildOutcome::Succeeded {
        description: AgentDescription {
            routes: vec!["/chat".into()],
            tools: vec![],
        },
        artifact: Artifact {
            component_sha256: String::new(),
            artifact_sha256: String::new(),
            engine: String::new(),
        },
    }
}

#[tokio::test]
async fn a_slow_older_build_never_replaces_a_newer_current_one() {
    let (_dir, store, writer) = open();
    let v1 = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    let v2 = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    assert_eq!((v1.version, v2.version), (1, 2));
    let done2 = writer.finish_build(v2.id, success()).await.unwrap();
    assert_eq!(done2.status, DeploymentStatus::Active);
    let done1 = writer.finish_build(v1.id, success()).await.unwrap();
    assert_eq!(done1.status, DeploymentStatus::Retired);
    let app = store.app("app").unwrap().unwrap();
    assert_eq!(app.current_deployment, Some(v2.id));
    // A finished build cannot finish again.
    assert!(matches!(
        writer.finish_build(v1.id, success()).await,
        Err(StoreError::Conflict(_))
    ));
    // The next success replaces the current one, which is retired.
    let v3 = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(v3.id, success()).await.unwrap();
    assert_eq!(
        store.deployment(v2.id).unwrap().unwrap().status,
        DeploymentStatus::Retired
    );
    assert_eq!(
        store.app("app").unwrap().unwrap().current_deployment,
        Some(v3.id)
    );
}

#[tokio::test]
async fn the_writer_decides_turn_states_and_seq() {
    let (_dir, store, writer) = open();
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let boot = Uuid::now_v7();
    let (session, ticket) = writer
        .create_session("app".into(), "/chat".into(), json!("hi"), boot)
        .await
        .unwrap();
    assert_eq!(session.status, SessionStatus::Running);
    // SESSION_CREATED, TURN_STARTED and the user message, seq 0..=4.
    let events = store.events(session.id, 0, 100).unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert!(matches!(
        writer.post_input(session.id, json!("x"), boot).await,
        Err(StoreError::Conflict(_))
    ));
    // A stale turn number cannot write.
    let stale = writer
        .append(session.id, 7, vec![])
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(matches!(stale, Err(StoreError::Conflict(_))));
    writer
        .finish_turn(ticket.session_id, ticket.turn, vec![], TurnOutcome::Errored)
        .await
        .unwrap();
    let next = writer
        .post_input(session.id, json!("again"), boot)
        .await
        .unwrap();
    assert_eq!(next.turn, 2);
    // A later process closes the turn this one left running.
    let closed = writer.close_interrupted(Uuid::now_v7()).await.unwrap();
    assert_eq!(closed, vec![session.id]);
    let record = store.session(session.id).unwrap().unwrap();
    assert_eq!(record.status, SessionStatus::Errored);
    let last = store.events(session.id, 0, 100).unwrap().pop().unwrap();
    assert!(last.json.contains("host_restarted"));
    let position = store.event_position(last.id).unwrap().unwrap();
    assert_eq!((position.session, position.seq), (session.id, last.seq));
}
