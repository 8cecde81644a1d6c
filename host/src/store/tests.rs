//! Store tests against a real redb file: version assignment, the current
//! deployment rule, and the turn state machine decided by the writer.

use std::sync::Arc;

use serde_json::json;
use uuid::Uuid;

use super::domain::MAX_QUEUED_INPUTS;
use super::outbox::Outbox;
use super::*;
use crate::journal::NewEvent;
use crate::store::By;
use crate::store::Cap;
use crate::store::test_calls::HostCalls;

pub(crate) fn open() -> (tempfile::TempDir, Db, WriterHandle) {
    let dir = tempfile::tempdir().unwrap();
    let store = Db::open(&dir.path().join("db.redb")).unwrap();
    let writer = Writer::spawn(store.clone()).unwrap();
    (dir, store, writer)
}

/// Appends `events` to a turn and waits until they are committed.
async fn append_committed(writer: &WriterHandle, outbox: &Arc<Outbox>, events: Vec<NewEvent>) {
    let ack = writer.append(outbox, events).await.unwrap();
    ack.await.unwrap().unwrap();
}

pub(crate) fn new_deployment(version: Option<u64>) -> NewDeployment {
    NewDeployment {
        app_slug: "app".into(),
        version,
        manifest: String::new(),
        entry: "a.wasm".into(),
        manifest_gated: Vec::new(),
        approval_policy: Vec::new(),
        secrets: Vec::new(),
        limits: Default::default(),
        outbound: Vec::new(),
        end_users: None,
        end_user_approvals: Vec::new(),
        llm_budget: None,
    }
}

/// Ends `turn` of `session` suspended on the gated `call` alone (its
/// input: `input`), with its TOOL_APPROVAL_REQUIRED as a runner writes it.
pub(crate) async fn suspend(
    writer: &WriterHandle,
    session: Uuid,
    turn: u32,
    call: ToolCallRecord,
    input: serde_json::Value,
) {
    let required = NewEvent::of(&crate::journal::payloads::ToolApprovalRequired {
        tool_call_id: call.tool_call_id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        reason: None,
        gated_by: vec!["code".into()],
        expires_at: None,
    });
    let pending = PendingApproval {
        call: call.clone(),
        reason: None,
        gated_by: vec!["code".into()],
        step: vec![call],
        input,
        event_seq: 0,
        expires_at: None,
    };
    writer
        .finish_turn(
            session,
            turn,
            vec![required],
            TurnOutcome::Suspended(Box::new(pending)),
        )
        .await
        .unwrap();
}

/// Deploys app `app` and finishes its build: it takes sessions.
pub(crate) async fn deployed(writer: &WriterHandle) {
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
}

pub(crate) fn success() -> BuildOutcome {
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
    deployed(&writer).await;
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("hi"))
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
        writer.next_input(session.id, json!("x")).await,
        Err(StoreError::Conflict(_))
    ));
    // A stale turn number cannot write.
    let stale = writer
        .append(&Arc::new(Outbox::new(session.id, 7)), vec![])
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(matches!(stale, Err(StoreError::Conflict(_))));
    writer
        .finish_turn(ticket.session_id, ticket.turn, vec![], TurnOutcome::Errored)
        .await
        .unwrap();
    let next = writer.next_input(session.id, json!("again")).await.unwrap();
    assert_eq!(next.turn, 2);
    // A later process runs again the accepted turn that left no trace...
    drop(writer);
    let writer = Writer::spawn(store.clone()).unwrap();
    let recovery = writer.recover().await.unwrap();
    assert!(recovery.closed.is_empty());
    assert_eq!(recovery.restarted.len(), 1);
    let restarted = &recovery.restarted[0];
    assert_eq!((restarted.session_id, restarted.turn), (session.id, 2));
    assert_eq!(restarted.input, json!("again"));
    assert_eq!(
        store.session(session.id).unwrap().unwrap().boot_id,
        Some(writer.boot())
    );
    // ... and closes one that did something.
    let delta = crate::journal::NewEvent::untyped(
        crate::journal::EventType::MessageStart,
        json!({"message_id": "m", "role": "assistant"}),
    );
    append_committed(&writer, &Arc::new(Outbox::new(session.id, 2)), vec![delta]).await;
    drop(writer);
    let writer = Writer::spawn(store.clone()).unwrap();
    let recovery = writer.recover().await.unwrap();
    assert_eq!(recovery.closed, vec![session.id]);
    let record = store.session(session.id).unwrap().unwrap();
    assert_eq!(record.status, SessionStatus::Errored);
    let last = store.events(session.id, 0, 100).unwrap().pop().unwrap();
    assert!(last.json.contains("host_restarted"));
    let seq = store.event_seq(session.id, last.id).unwrap();
    assert_eq!(seq, Some(last.seq));
    // An id resolves only within its own session.
    assert_eq!(store.event_seq(Uuid::now_v7(), last.id).unwrap(), None);
}

/// A file backend whose writes and syncs fail once `fail` is set (disk full).
#[derive(Debug)]
pub(super) struct FailingBackend {
    pub(super) inner: ::redb::backends::FileBackend,
    pub(super) fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FailingBackend {
    fn check(&self) -> Result<(), std::io::Error> {
        if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::other("no space left on device (injected)"));
        }
        Ok(())
    }
}

impl ::redb::StorageBackend for FailingBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.check()?;
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.check()?;
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.check()?;
        self.inner.write(offset, data)
    }
}

#[tokio::test]
async fn a_failing_disk_stops_writes_and_nothing_half_written_is_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.redb");
    let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .unwrap();
    let backend = FailingBackend {
        inner: ::redb::backends::FileBackend::new(file).unwrap(),
        fail: fail.clone(),
    };
    let store = Db::new(redb::RedbEngine::open_with_backend(backend).unwrap());
    let writer = Writer::spawn(store.clone()).unwrap();
    deployed(&writer).await;
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    let committed = store.events(session.id, 0, 100).unwrap();
    let mut subscription = store.hub().subscribe(session.id);

    fail.store(true, std::sync::atomic::Ordering::Relaxed);
    let delta = crate::journal::NewEvent::untyped(crate::journal::EventType::TurnEnded, json!({}));
    let ack = writer
        .append(&Arc::new(Outbox::new(session.id, ticket.turn)), vec![delta])
        .await
        .unwrap();
    assert!(matches!(ack.await.unwrap(), Err(StoreError::Storage(_))));
    assert!(store.is_degraded());
    // Writes stay stopped, even once the disk would accept them again.
    fail.store(false, std::sync::atomic::Ordering::Relaxed);
    let again = writer
        .new_session("app".into(), "/chat".into(), json!("x"))
        .await;
    assert!(matches!(again, Err(StoreError::Storage(_))));
    assert!(subscription.rx.try_recv().is_err(), "nothing was published");
    assert_eq!(
        store.events(session.id, 0, 100).unwrap().len(),
        committed.len()
    );

    // After a restart the journal holds exactly what was acknowledged.
    drop((writer, subscription, store));
    // The writer thread lets go of the file once it sees its queue closed.
    let mut reopened = Db::open(&path);
    for _ in 0..500 {
        if reopened.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        reopened = Db::open(&path);
    }
    let reopened = reopened.unwrap();
    let events = reopened.events(session.id, 0, 100).unwrap();
    assert_eq!(
        events.iter().map(|e| (e.id, e.seq)).collect::<Vec<_>>(),
        committed.iter().map(|e| (e.id, e.seq)).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_resumed_turn_that_started_is_never_run_again() {
    let (_dir, store, writer) = open();
    deployed(&writer).await;
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("delete x"))
        .await
        .unwrap();
    let call = ToolCallRecord {
        tool_call_id: "call_1_1".into(),
        name: "delete_record".into(),
        arguments: json!({"name": "x"}),
    };
    suspend(&writer, session.id, ticket.turn, call, json!("delete x")).await;
    let decision = Decision {
        approved: true,
        approver: "alice".into(),
        by: By::Platform { key_id: "k".into() },
        details: Default::default(),
        checked_seq: None,
    };
    let resumed = writer.decide_now(session.id, decision).await.unwrap();
    // The resumed turn did something, then the process died.
    let start = crate::journal::NewEvent::untyped(
        crate::journal::EventType::MessageStart,
        json!({"message_id": "m", "role": "assistant"}),
    );
    let outbox = Arc::new(Outbox::new(session.id, resumed.turn));
    append_committed(&writer, &outbox, vec![start]).await;
    drop(writer);
    let writer = Writer::spawn(store.clone()).unwrap();
    let recovery = writer.recover().await.unwrap();
    assert!(
        recovery.restarted.is_empty(),
        "never re-run behind the user's back"
    );
    assert_eq!(recovery.closed, vec![session.id]);
    let last = store.events(session.id, 0, 100).unwrap().pop().unwrap();
    assert!(
        last.json.contains("host_restarted") && last.json.contains("may or may not have run"),
        "{}",
        last.json
    );
    assert!(last.json.contains("call_1_1"));
}

/// A secret split across two deltas is redacted in neither; when the writer
/// closes the turn itself (after a crash) the text it rebuilds from them is.
#[tokio::test]
async fn a_rebuilt_message_end_has_secrets_split_across_deltas_redacted() {
    use crate::journal::EventType;
    let dir = tempfile::tempdir().unwrap();
    let store = Db::open(&dir.path().join("db.redb")).unwrap();
    let redact: CurrentRedactor =
        Arc::new(|| crate::redact::Redactor::new(vec![("TOKEN".into(), Arc::from("sk-12345"))]));
    let host = Uuid::now_v7();
    let writer =
        Writer::spawn_for_host(store.clone(), host, redact.clone(), Quotas::default()).unwrap();
    deployed(&writer).await;
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!({}))
        .await
        .unwrap();
    let outbox = Arc::new(Outbox::new(session.id, ticket.turn));
    let delta = |text: &str| {
        NewEvent::untyped(
            EventType::MessageDelta,
            json!({"message_id": "m", "delta": {"type": "text", "text": text}}),
        )
    };
    let start = NewEvent::untyped(
        EventType::MessageStart,
        json!({"message_id": "m", "role": "assistant"}),
    );
    let events = vec![start, delta("the key is sk-12"), delta("345, keep it")];
    append_committed(&writer, &outbox, events).await;
    // The process "dies" here; the next one closes the turn.
    drop(writer);
    let next = Uuid::now_v7();
    let writer = Writer::spawn_for_host(store.clone(), next, redact, Quotas::default()).unwrap();
    let recovery = writer.recover().await.unwrap();
    assert_eq!(recovery.closed, vec![session.id]);
    let events = store.events(session.id, 0, 100).unwrap();
    let end = events
        .iter()
        .find(|e| e.event_type() == "MESSAGE_END")
        .expect("a rebuilt MESSAGE_END");
    let end: serde_json::Value = serde_json::from_str(&end.json).unwrap();
    assert_eq!(
        end["payload"]["text"],
        "the key is [REDACTED:TOKEN], keep it"
    );
    assert_eq!(end["payload"]["incomplete"], true);
    assert!(events.iter().all(|e| !e.json.contains("sk-12345")));
}

#[tokio::test]
async fn a_deleted_session_leaves_no_trace_and_the_writer_never_brings_it_back() {
    let (_dir, store, writer) = open();
    deployed(&writer).await;
    let (gone, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    let (kept, kept_ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    // Running: refused (cancel first).
    assert!(matches!(
        writer.delete_session(gone.id, None).await,
        Err(StoreError::Conflict(_))
    ));
    writer
        .finish_turn(gone.id, ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let ids: Vec<Uuid> = store
        .events(gone.id, 0, 100)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids.len(), 5);
    // The retention purge deletes only sessions that ended before its cutoff.
    assert!(matches!(
        writer.delete_session(gone.id, Some(now_rfc3339())).await,
        Err(StoreError::Conflict(_))
    ));
    writer.delete_session(gone.id, None).await.unwrap();
    assert!(store.session(gone.id).unwrap().is_none());
    assert!(store.events(gone.id, 0, 100).unwrap().is_empty());
    for id in ids {
        assert!(store.event_seq(gone.id, id).unwrap().is_none());
    }
    // The writer's cache of sessions does not bring it back.
    assert!(matches!(
        writer.next_input(gone.id, json!("again")).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        writer.delete_session(gone.id, None).await,
        Err(StoreError::NotFound { .. })
    ));
    // The other session is untouched, and goes on.
    assert_eq!(store.events(kept.id, 0, 100).unwrap().len(), 5);
    writer
        .finish_turn(kept.id, kept_ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    // Ended long enough ago: purged.
    writer
        .end_session(kept.id, Some("done".into()), "key_1".into())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    writer
        .delete_session(kept.id, Some(now_rfc3339()))
        .await
        .unwrap();
    assert!(store.session(kept.id).unwrap().is_none());
}

/// The approvals feed: one entry per request, decision and withdrawal, in
/// commit order with seqs from 1, each carrying its journal event; the
/// app filter; a deletion takes the session's entries and withdraws its
/// approval; the purge raises the purge mark.
#[tokio::test]
async fn the_approvals_feed_follows_every_approval_in_commit_order() {
    let (_dir, store, writer) = open();
    deployed(&writer).await;
    let call = |id: &str| ToolCallRecord {
        tool_call_id: id.into(),
        name: "refund".into(),
        arguments: json!({"amount": 5}),
    };
    let (a, ta) = writer
        .new_session("app".into(), "/chat".into(), json!("a"))
        .await
        .unwrap();
    let (b, tb) = writer
        .new_session("app".into(), "/chat".into(), json!("b"))
        .await
        .unwrap();
    let (head, pending) = store.approval_snapshot(None).unwrap();
    assert_eq!((head, pending.len()), (0, 0));
    suspend(&writer, a.id, ta.turn, call("call_a"), json!("a")).await;
    suspend(&writer, b.id, tb.turn, call("call_b"), json!("b")).await;
    let decision = Decision {
        approved: false,
        approver: "ann".into(),
        by: By::Platform {
            key_id: "key_1".into(),
        },
        details: Default::default(),
        checked_seq: None,
    };
    writer.decide_now(a.id, decision).await.unwrap();
    let (head, pending) = store.approval_snapshot(None).unwrap();
    assert_eq!(head, 3);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].session.id, b.id);

    let page = store.approval_feed(0, None, 100).unwrap();
    assert_eq!(
        (page.head, page.purged_through, page.read_through),
        (3, 0, 3)
    );
    let entries: Vec<ApprovalFeedEntry> = (page.items.iter())
        .map(|item| serde_json::from_str(&item.json).unwrap())
        .collect();
    let seqs: Vec<u64> = page.items.iter().map(|item| item.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    let kinds: Vec<(FeedKind, Uuid, &str)> = (entries.iter())
        .map(|e| (e.kind, e.session_id, e.tool_call_id.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (FeedKind::Requested, a.id, "call_a"),
            (FeedKind::Requested, b.id, "call_b"),
            (FeedKind::Decided, a.id, "call_a"),
        ]
    );
    let event_type = |e: &ApprovalFeedEntry| e.event.as_ref().unwrap()["type"].clone();
    assert_eq!(event_type(&entries[0]), "TOOL_APPROVAL_REQUIRED");
    assert_eq!(event_type(&entries[2]), "TOOL_APPROVAL_DENIED");
    assert_eq!(
        entries[2].event.as_ref().unwrap()["payload"]["approver"],
        "ann"
    );
    // The event in the feed is the journal's, byte for byte as parsed.
    let journaled = store.events(a.id, 0, 100).unwrap();
    let required = journaled
        .iter()
        .find(|e| e.event_type() == "TOOL_APPROVAL_REQUIRED")
        .unwrap();
    let required: serde_json::Value = serde_json::from_str(&required.json).unwrap();
    assert_eq!(entries[0].event.as_ref(), Some(&required));
    // Resuming mid-way, and the app filter.
    let rest = store.approval_feed(2, None, 100).unwrap();
    assert_eq!(rest.items.iter().map(|i| i.seq).collect::<Vec<_>>(), [3]);
    let other = store.approval_feed(0, Some(Uuid::now_v7()), 100).unwrap();
    assert!(other.items.is_empty());
    assert_eq!(other.read_through, 3);
    let limited = store.approval_feed(0, None, 2).unwrap();
    assert_eq!((limited.items.len(), limited.read_through), (2, 2));

    // Deleting b (awaiting): its entries go, and its approval is withdrawn.
    writer.delete_session(b.id, None).await.unwrap();
    let page = store.approval_feed(0, None, 100).unwrap();
    let left: Vec<(u64, ApprovalFeedEntry)> = (page.items.iter())
        .map(|item| (item.seq, serde_json::from_str(&item.json).unwrap()))
        .collect();
    assert_eq!(left.len(), 3);
    assert_eq!(left[2].0, 4);
    assert_eq!(left[2].1.kind, FeedKind::Withdrawn);
    assert_eq!(left[2].1.reason, Some(WithdrawReason::SessionDeleted));
    assert!(left[2].1.event.is_none());
    assert!(
        left.iter()
            .all(|(seq, e)| e.session_id != b.id || *seq == 4)
    );

    // The purge forgets entries by age and raises the purge mark.
    assert_eq!(writer.purge_feed(0, 100).await.unwrap(), 0);
    assert_eq!(writer.purge_feed(u64::MAX, 2).await.unwrap(), 2);
    let page = store.approval_feed(0, None, 100).unwrap();
    assert_eq!((page.head, page.purged_through), (4, 3));
    assert_eq!(page.items.iter().map(|i| i.seq).collect::<Vec<_>>(), [4]);
}

/// The input of each TURN_STARTED of `session`, in journal order.
fn started_inputs(store: &Db, session: Uuid) -> Vec<serde_json::Value> {
    (store.events(session, 0, 1000).unwrap().iter())
        .filter(|e| e.event_type() == "TURN_STARTED")
        .map(|e| {
            serde_json::from_str::<serde_json::Value>(&e.json).unwrap()["payload"]["input"].clone()
        })
        .collect()
}

#[tokio::test]
async fn queued_inputs_start_in_order_as_turns_end_and_the_queue_is_bounded() {
    let (_dir, store, writer) = open();
    deployed(&writer).await;
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("first"))
        .await
        .unwrap();
    let queue = |input: serde_json::Value, on_busy| {
        writer.input(session.id, input, By::host(), on_busy, None)
    };
    let a = queue(json!("a"), OnBusy::Enqueue).await.unwrap();
    let Some(InputOutcome::Queued(a)) = a.work else {
        panic!("not queued: {:?}", a.work)
    };
    assert_eq!((a.turn, a.position, a.interrupts), (1, 1, None));
    queue(json!("b"), OnBusy::Enqueue).await.unwrap();
    // An interrupt goes first, and names the turn its caller cancels.
    let c = queue(json!("c"), OnBusy::Interrupt).await.unwrap();
    let Some(InputOutcome::Queued(c)) = c.work else {
        panic!("not queued")
    };
    assert_eq!((c.position, c.interrupts), (1, Some(1)));
    // The bound: MAX_QUEUED_INPUTS per session, then 429 `queued_inputs`.
    for n in 3..MAX_QUEUED_INPUTS {
        queue(json!(n), OnBusy::Enqueue).await.unwrap();
    }
    let full = queue(json!("one too many"), OnBusy::Enqueue).await;
    assert!(
        matches!(
            full,
            Err(StoreError::Quota {
                cap: Cap::QueuedInputs,
                ..
            })
        ),
        "{full:?}"
    );
    // Without `on_busy` the contract's 409 stands.
    assert!(matches!(
        writer.next_input(session.id, json!("x")).await,
        Err(StoreError::Conflict(_))
    ));
    // The turn's end starts the first queued input in its commit.
    writer
        .finish_turn(session.id, ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let now = store.session(session.id).unwrap().unwrap();
    assert_eq!((now.status, now.turn), (SessionStatus::Running, 2));
    assert_eq!(now.queued.len(), MAX_QUEUED_INPUTS - 1);
    // ...and so on, an errored turn included, until the queue is empty.
    for turn in 2..=(MAX_QUEUED_INPUTS as u32 + 1) {
        writer
            .finish_turn(session.id, turn, vec![], TurnOutcome::Errored)
            .await
            .unwrap();
    }
    let now = store.session(session.id).unwrap().unwrap();
    assert_eq!(now.status, SessionStatus::Errored);
    assert!(now.queued.is_empty());
    let mut expected = vec![json!("first"), json!("c"), json!("a"), json!("b")];
    expected.extend((3..MAX_QUEUED_INPUTS).map(|n| json!(n)));
    assert_eq!(started_inputs(&store, session.id), expected);
    let queued = (store.events(session.id, 0, 1000).unwrap().iter())
        .filter(|e| e.event_type() == "INPUT_QUEUED")
        .count();
    assert_eq!(queued, MAX_QUEUED_INPUTS);
}

#[tokio::test]
async fn a_queued_input_waits_for_a_decision_and_an_ended_session_drops_its_queue() {
    let (_dir, store, writer) = open();
    deployed(&writer).await;
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("first"))
        .await
        .unwrap();
    let call = ToolCallRecord {
        tool_call_id: "call_1_1".into(),
        name: "rm".into(),
        arguments: json!({}),
    };
    suspend(&writer, session.id, ticket.turn, call, json!("first")).await;
    let interrupt = writer
        .input(
            session.id,
            json!("now"),
            By::host(),
            OnBusy::Interrupt,
            None,
        )
        .await;
    assert!(
        matches!(interrupt, Err(StoreError::Conflict(_))),
        "{interrupt:?}"
    );
    let queued = writer
        .input(
            session.id,
            json!("later"),
            By::host(),
            OnBusy::Enqueue,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        queued.answer.queued.unwrap().status,
        SessionStatus::AwaitingApproval
    );
    let decision = Decision {
        approved: true,
        approver: "ops".into(),
        by: By::Platform { key_id: "k".into() },
        details: Default::default(),
        checked_seq: None,
    };
    let resumed = writer.decide_now(session.id, decision).await.unwrap();
    assert_eq!(store.session(session.id).unwrap().unwrap().queued.len(), 1);
    writer
        .finish_turn(session.id, resumed.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    assert_eq!(
        started_inputs(&store, session.id).last(),
        Some(&json!("later"))
    );
    // A session that ends drops what waits.
    writer
        .input(
            session.id,
            json!("never"),
            By::host(),
            OnBusy::Enqueue,
            None,
        )
        .await
        .unwrap();
    writer
        .finish_turn(
            session.id,
            resumed.turn + 1,
            vec![],
            TurnOutcome::SessionEnded,
        )
        .await
        .unwrap();
    let now = store.session(session.id).unwrap().unwrap();
    assert_eq!(now.status, SessionStatus::Ended);
    assert!(now.queued.is_empty());
    assert!(!started_inputs(&store, session.id).contains(&json!("never")));
}

/// Edited arguments are decided only against the call the API checked them
/// against: a check of another call (or none) is a conflict that decides
/// nothing; the right one resumes with the edit everywhere the turn reads
/// the call, and the journal keeps the agent's arguments beside it.
#[tokio::test]
async fn an_edit_decides_only_the_call_it_was_checked_against() {
    let (_dir, store, writer) = open();
    deployed(&writer).await;
    let (s, t) = writer
        .new_session("app".into(), "/chat".into(), json!("a"))
        .await
        .unwrap();
    let call = ToolCallRecord {
        tool_call_id: "call_1_1".into(),
        name: "refund".into(),
        arguments: json!({"amount": 5}),
    };
    suspend(&writer, s.id, t.turn, call, json!("a")).await;
    let pending = store.session(s.id).unwrap().unwrap().pending_approval;
    let seq = pending.unwrap().event_seq;
    let edit = |checked_seq| Decision {
        approved: true,
        approver: "ann".into(),
        by: By::Platform { key_id: "k".into() },
        details: DecisionDetails {
            arguments: Some(json!({"amount": 3})),
            message: None,
            result: None,
            address_hash: None,
        },
        checked_seq,
    };
    for stale in [Some(seq + 1), None] {
        let refused = writer.decide_now(s.id, edit(stale)).await.unwrap_err();
        assert!(matches!(refused, StoreError::Conflict(_)), "{refused:?}");
    }
    let record = store.session(s.id).unwrap().unwrap();
    assert!(record.pending_approval.is_some(), "nothing decided");
    let ticket = writer.decide_now(s.id, edit(Some(seq))).await.unwrap();
    let TurnReason::ApprovalDecision {
        pending, details, ..
    } = ticket.reason
    else {
        panic!("a decision resumes the turn");
    };
    assert_eq!(pending.call.arguments, json!({"amount": 3}));
    assert_eq!(pending.step[0].arguments, json!({"amount": 3}));
    assert_eq!(details.arguments, Some(json!({"amount": 3})));
    let resume = store.session(s.id).unwrap().unwrap().resume.unwrap();
    assert_eq!(resume.pending.call.arguments, json!({"amount": 3}));
    let events = store.events(s.id, 0, 100).unwrap();
    let granted = (events.iter())
        .find(|e| e.event_type() == "TOOL_APPROVAL_GRANTED")
        .unwrap();
    let granted: serde_json::Value = serde_json::from_str(&granted.json).unwrap();
    assert_eq!(granted["payload"]["arguments"], json!({"amount": 3}));
    assert_eq!(
        granted["payload"]["original_arguments"],
        json!({"amount": 5})
    );
}

/// The writer decides what a caller may do against the deployment its
/// command pins (`domain::by`), whatever an edge checked before: a bare
/// invocation key is refused once the app's current deployment requires
/// end-user tokens, and let in again after a rollback; an input to a
/// session pinned to the deployment before keeps that deployment's answer;
/// an end user's session records only the claims the pinned policy lets
/// through, and their schedules follow its `[end_users] schedules`.
#[tokio::test]
async fn the_writer_decides_a_callers_policy_against_the_pinned_deployment() {
    use crate::store::{EndUsersRecord, PolicyRefusal};
    let (_dir, store, writer) = open();
    let deploy = |required: bool| {
        let writer = writer.clone();
        async move {
            let mut new = new_deployment(None);
            new.end_users = Some(EndUsersRecord {
                required,
                claims: vec!["plan".into()],
                ..Default::default()
            });
            let d = writer.create_deployment(new).await.unwrap();
            writer.finish_build(d.id, success()).await.unwrap()
        }
    };
    let bare = By::AppKey {
        key_id: "inv_1".into(),
        source: None,
    };
    let create =
        |by: By| writer.create_session("app".into(), "/chat".into(), json!("hi"), by, None);
    let open_one = deploy(false).await;
    let (old, ticket) = create(bare.clone()).await.unwrap().work.unwrap();
    (writer.finish_turn(old.id, ticket.turn, vec![], TurnOutcome::Ended))
        .await
        .unwrap();
    // Activated after whatever check an edge made: the writer refuses.
    deploy(true).await;
    let refused = create(bare.clone()).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Policy(PolicyRefusal::TokenRequired)),
        "{refused:?}"
    );
    // And an input to a session of the deployment before: the app's
    // policy is its current deployment's, read in the command's commit.
    let on_busy = OnBusy::Reject;
    let input = writer.input(old.id, json!("more"), bare.clone(), on_busy, None);
    let refused = input.await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Policy(PolicyRefusal::TokenRequired)),
        "{refused:?}"
    );
    // An end user: their session records the claims the policy allows.
    let user = By::EndUser {
        key_id: "user:1".into(),
        user: "ada".into(),
        claims: serde_json::from_value(json!({"plan": "pro", "email": "a@b"})).unwrap(),
    };
    let (mine, _) = create(user.clone()).await.unwrap().work.unwrap();
    assert_eq!(mine.end_user.as_deref(), Some("ada"));
    let created = store.events(mine.id, 0, 1).unwrap();
    assert!(
        created[0].json.contains(r#""claims":{"plan":"pro"}"#),
        "{}",
        created[0].json
    );
    // Their schedule: the pinned deployment does not let end users schedule.
    let schedule = ScheduleRecord {
        id: Uuid::now_v7(),
        due_ms: u64::MAX / 2,
        input: json!("later"),
        ..Default::default()
    };
    let refused = (writer.create_schedule(mine.id, schedule, user))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::Policy(PolicyRefusal::SchedulesNotAllowed)
        ),
        "{refused:?}"
    );
    // A rollback to the open deployment lets the bare key in again.
    writer.activate(open_one.id).await.unwrap();
    assert!(create(bare).await.unwrap().work.is_some());
}
