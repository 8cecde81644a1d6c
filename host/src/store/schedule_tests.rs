//! Schedules in the store (`domain::schedules`): a due schedule fires
//! exactly once however many hosts fire it at once (two writers on one
//! PostgreSQL database; one writer twice on redb); a deleted one fires
//! nothing; one due while a turn runs is queued and starts, with its
//! reason, when the turn ends; one of a full journal is dropped.

use serde_json::{Value, json};
use uuid::Uuid;

use super::engine::ScheduleOwner;
use super::idempotency_tests::{Backend, start};
use super::tests::{new_deployment, success};
use super::*;
use crate::store::Cap;
use crate::store::test_calls::HostCalls;

fn due_now(input: Value) -> ScheduleRecord {
    ScheduleRecord {
        id: Uuid::now_v7(),
        at: now_rfc3339(),
        due_ms: unix_ms(std::time::SystemTime::now()),
        input,
        created_at: now_rfc3339(),
        ..Default::default()
    }
}

/// Each TURN_STARTED's (turn, reason).
async fn starts(store: &Db, session: Uuid) -> Vec<(u64, Value)> {
    let events = store.read(move |s| s.events(session, 0, 1000)).await;
    (events.unwrap().iter())
        .filter(|e| e.event_type() == "TURN_STARTED")
        .map(|e| {
            let event: Value = serde_json::from_str(&e.json).unwrap();
            let payload = &event["payload"];
            (payload["turn"].as_u64().unwrap(), payload["reason"].clone())
        })
        .collect()
}

/// Every schedule due now (and before the end of time).
async fn due_now_in(store: &Db) -> Vec<DueSchedule> {
    store.read(|s| s.due_schedules(u64::MAX, 10)).await.unwrap()
}

/// `a` and `b` fire the same schedules at once: two hosts' writers, or one writer twice.
async fn fires_once(store: Db, a: WriterHandle, b: WriterHandle) {
    let d = a.create_deployment(new_deployment(None)).await.unwrap();
    a.finish_build(d.id, success()).await.unwrap();
    let (session, ticket) = a
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    let id = session.id;

    // Due while turn 1 runs: queued, started with its reason when the turn ends.
    let queued = a
        .create_schedule(id, due_now(json!("q")), By::host())
        .await
        .unwrap();
    let due = due_now_in(&store).await;
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].owner, ScheduleOwner::Session(id), "a session's row");
    let (x, y) = tokio::join!(a.fire_schedule(due[0]), b.fire_schedule(due[0]));
    let fired: Vec<Fired> = vec![x.unwrap(), y.unwrap()];
    let queued_once = (fired.iter())
        .filter(|f| matches!(f, Fired::Input(InputOutcome::Queued(_))))
        .count();
    assert_eq!(queued_once, 1, "{fired:?}");
    assert!(due_now_in(&store).await.is_empty());
    a.finish_turn(id, ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    a.finish_turn(id, 2, vec![], TurnOutcome::Ended)
        .await
        .unwrap();

    // Idle: one of two hosts firing at once starts the turn, the other finds it gone.
    let idle = a
        .create_schedule(id, due_now(json!("i")), By::host())
        .await
        .unwrap();
    let deleted = a
        .create_schedule(id, due_now(json!("d")), By::host())
        .await
        .unwrap();
    a.delete_schedule(id, deleted.id).await.unwrap();
    assert!(matches!(
        a.delete_schedule(id, deleted.id).await,
        Err(StoreError::NotFound { .. })
    ));
    let due = due_now_in(&store).await;
    assert_eq!(due.len(), 1, "the deleted one is not due: {due:?}");
    let (x, y) = tokio::join!(b.fire_schedule(due[0]), a.fire_schedule(due[0]));
    let fired: Vec<Fired> = vec![x.unwrap(), y.unwrap()];
    let started = (fired.iter())
        .filter(|f| matches!(f, Fired::Input(InputOutcome::Started(_))))
        .count();
    assert_eq!(started, 1, "{fired:?}");
    // A late retry of the firing finds nothing either.
    assert!(matches!(a.fire_schedule(due[0]).await, Ok(Fired::Dropped)));
    assert_eq!(
        starts(&store, id).await,
        [
            (1, json!({"kind": "input"})),
            (2, json!({"kind": "schedule", "schedule_id": queued.id})),
            (3, json!({"kind": "schedule", "schedule_id": idle.id})),
        ]
    );
    let record = store.read(move |s| s.session(id)).await.unwrap().unwrap();
    assert!(record.schedules.is_empty() && record.queued.is_empty());

    // An app's schedule: its row is keyed by the app's id (the stored index
    // as it was) and reads as the app's; firing it creates a session, once.
    let record = ScheduleRecord {
        route: Some("/chat".into()),
        ..due_now(json!("a"))
    };
    let (app, _) = a.create_app_schedule("app".into(), record).await.unwrap();
    let due = due_now_in(&store).await;
    let owners: Vec<ScheduleOwner> = due.iter().map(|d| d.owner).collect();
    assert_eq!(owners, [ScheduleOwner::App(app)], "an app's row");
    let (x, y) = tokio::join!(a.fire_schedule(due[0]), b.fire_schedule(due[0]));
    let fired: Vec<Fired> = vec![x.unwrap(), y.unwrap()];
    let created = (fired.iter())
        .filter(|f| matches!(f, Fired::Session(..)))
        .count();
    assert_eq!(created, 1, "{fired:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redb_a_schedule_fires_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = start(&Backend::Redb(dir.path().join("db.redb"))).await;
    fires_once(store, writer.clone(), writer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_two_hosts_firing_a_schedule_fire_it_once() {
    let name = format!("sched_{}", Uuid::now_v7().simple());
    let url = tokio::task::block_in_place(|| super::pg_cluster::database(&name));
    let (store, a) = start(&Backend::Postgres(url.clone())).await;
    let (_other, b) = start(&Backend::Postgres(url)).await;
    fires_once(store, a, b).await;
}

/// A cron schedule past due by an hour (the server was down) fires once and
/// is due again at its next time after now: no catch-up storm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_cron_schedule_fires_once_and_is_due_again_after_now() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = start(&Backend::Redb(dir.path().join("db.redb"))).await;
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    let id = session.id;
    writer
        .finish_turn(id, ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let hour_ago = unix_ms(std::time::SystemTime::now()) - 3_600_000;
    let record = ScheduleRecord {
        due_ms: hour_ago,
        cron: Some("*/10 * * * * *".into()),
        timezone: Some("UTC".into()),
        ..due_now(json!("tick"))
    };
    let every = writer
        .create_schedule(id, record, By::host())
        .await
        .unwrap();
    let due = due_now_in(&store).await;
    assert_eq!(due.len(), 1);
    let fired = writer.fire_schedule(due[0]).await.unwrap();
    assert!(
        matches!(fired, Fired::Input(InputOutcome::Started(_))),
        "{fired:?}"
    );
    let now = unix_ms(std::time::SystemTime::now());
    let record = store.read(move |s| s.session(id)).await.unwrap().unwrap();
    let [again] = record.schedules.as_slice() else {
        panic!("{:?}", record.schedules)
    };
    assert_eq!(again.id, every.id);
    assert!(
        again.due_ms > now - 1_000 && again.due_ms <= now + 10_000,
        "{again:?}"
    );
    assert_eq!(again.at, rfc3339_ms(again.due_ms));
    // Its one row in the due index moved with it: nothing else is due.
    assert!(store.due_schedules(now, 10).unwrap().is_empty());
    assert_eq!(
        starts(&store, id).await,
        [
            (1, json!({"kind": "input"})),
            (2, json!({"kind": "schedule", "schedule_id": every.id})),
        ]
    );
}

/// The types of the session's events, in order.
async fn event_types(store: &Db, session: Uuid) -> Vec<String> {
    let events = store.read(move |s| s.events(session, 0, 1000)).await;
    (events.unwrap().iter())
        .map(|e| e.event_type().to_string())
        .collect()
}

/// An agent's timers (`domain::timers`): a turn that errs keeps none of
/// them; one that ends keeps them, journaled just before its TURN_ENDED
/// (cancels first), and they are due like any schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_are_kept_only_by_a_turn_that_ends_well() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = start(&Backend::Redb(dir.path().join("db.redb"))).await;
    let d = (writer.create_deployment(new_deployment(None)).await).unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let (session, ticket) = writer
        .new_session("app".into(), "/chat".into(), json!("hi"))
        .await
        .unwrap();
    let id = session.id;
    let old = ScheduleRecord {
        due_ms: u64::MAX / 2,
        ..due_now(json!("old"))
    };
    let old = writer.create_schedule(id, old, By::host()).await.unwrap();
    let ended = |turn| {
        vec![crate::journal::NewEvent::of(
            &crate::journal::payloads::TurnEnded { turn },
        )]
    };
    let timers = || TurnTimers {
        scheduled: vec![due_now(json!("new"))],
        cancelled: vec![old.id],
    };
    // Turn 1 errs: nothing scheduled, nothing cancelled.
    writer
        .finish_turn_with(id, ticket.turn, vec![], TurnOutcome::Errored, timers(), 0)
        .await
        .unwrap();
    let record = store.read(move |s| s.session(id)).await.unwrap().unwrap();
    assert_eq!(record.schedules, std::slice::from_ref(&old));
    assert!(due_now_in(&store).await.len() == 1);
    assert!(
        !event_types(&store, id)
            .await
            .contains(&"TURN_SCHEDULED".to_string())
    );
    // Turn 2 ends: the cancel and the new schedule, before TURN_ENDED.
    let ticket = writer.next_input(id, json!("again")).await.unwrap();
    let kept = timers();
    writer
        .finish_turn_with(
            id,
            ticket.turn,
            ended(2),
            TurnOutcome::Ended,
            kept.clone(),
            0,
        )
        .await
        .unwrap();
    let types = event_types(&store, id).await;
    assert_eq!(
        types[types.len() - 3..],
        ["TURN_SCHEDULE_CANCELLED", "TURN_SCHEDULED", "TURN_ENDED"]
    );
    // Kept as the agent's (an end user may not delete them).
    let record = store.read(move |s| s.session(id)).await.unwrap().unwrap();
    let agents = (kept.scheduled.iter())
        .map(|r| ScheduleRecord {
            created_by: Some(ScheduleCreator::Agent),
            ..r.clone()
        })
        .collect::<Vec<_>>();
    assert_eq!(record.schedules, agents);
    let due = due_now_in(&store).await;
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].schedule, kept.scheduled[0].id);
}

/// A session whose journal is at its cap (`--max-session-journal-mb`)
/// takes no input: its due schedule is dropped, not retried at every scan.
#[tokio::test]
async fn a_schedule_of_a_full_journal_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = Db::open(&dir.path().join("db.redb")).unwrap();
    let quotas = Quotas {
        journal_bytes: Some(64),
        ..Quotas::default()
    };
    let redact: CurrentRedactor = std::sync::Arc::new(crate::redact::Redactor::default);
    let writer = Writer::spawn_for_host(store.clone(), Uuid::now_v7(), redact, quotas).unwrap();
    let d = writer
        .create_deployment(new_deployment(None))
        .await
        .unwrap();
    writer.finish_build(d.id, success()).await.unwrap();
    let (session, ticket) = writer
        .new_session(
            "app".into(),
            "/chat".into(),
            json!("more than sixty-four bytes of input, in a few events"),
        )
        .await
        .unwrap();
    let id = session.id;
    writer
        .finish_turn(id, ticket.turn, vec![], TurnOutcome::Ended)
        .await
        .unwrap();
    let refused = writer.next_input(id, json!("x")).await.unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::Quota {
                cap: Cap::JournalBytes,
                ..
            }
        ),
        "{refused:?}"
    );
    writer
        .create_schedule(id, due_now(json!("tick")), By::host())
        .await
        .unwrap();
    let due = due_now_in(&store).await;
    assert_eq!(due.len(), 1);
    let fired = writer.fire_schedule(due[0]).await.unwrap();
    assert!(matches!(fired, Fired::Dropped), "{fired:?}");
    assert!(due_now_in(&store).await.is_empty());
    let record = store.read(move |s| s.session(id)).await.unwrap().unwrap();
    assert!(record.schedules.is_empty(), "{:?}", record.schedules);
    assert_eq!(starts(&store, id).await.len(), 1);
}

/// A schedule stored before `created_by` existed still loads (made by a
/// platform key or the agent: `None`, never an end user's); one with it
/// keeps it, and an older binary reading it ignores the field.
#[test]
fn a_schedule_stored_before_its_creator_was_recorded_still_loads() {
    let old = json!({"id": "019aa8e2-7b3c-7d4e-8f10-abcdef012345", "at": "2026-11-23T07:00:00.000Z",
        "due_ms": 1_795_417_200_000_u64, "input": "hi", "created_at": "2026-11-22T10:00:00.123Z"});
    let record: ScheduleRecord = serde_json::from_value(old).unwrap();
    assert_eq!(record.created_by, None);
    let new = ScheduleRecord {
        created_by: Some(ScheduleCreator::EndUser),
        ..record
    };
    let stored = serde_json::to_value(&new).unwrap();
    assert_eq!(stored["created_by"], "end_user");
    assert_eq!(
        serde_json::from_value::<ScheduleRecord>(stored).unwrap(),
        new
    );
}
