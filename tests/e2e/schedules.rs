//! Schedules from the API (docs/schedules.md): a one-shot schedule fires
//! once as a turn with reason `schedule`; a deleted one never fires; one
//! due while the server was down (kill -9) fires once after the restart;
//! one due while a turn runs is queued and runs next; bad times, ended
//! sessions and the per-session cap are refused. On both engines.
//!
//! "Never fired" and "fired once" are shown by order, not by waiting: a
//! later schedule's turn is awaited, and the journal up to it holds exactly
//! the turns expected.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Server, from_now, sample};

async fn slow_server(dir: &tempfile::TempDir) -> Server {
    let server = Server::start(dir.path()).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    server
}

/// An idle session of `slow` (its first turn ended).
async fn idle_session(server: &Server) -> String {
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 1}))
        .await;
    (server.events(&session, None).await)
        .until(&["TURN_ENDED"])
        .await;
    session
}

/// Schedules `input` on `session` at `at`; answers the schedule.
async fn schedule(server: &Server, session: &str, at: &str, input: Value) -> Value {
    let path = format!("/sessions/{session}/schedules");
    let (status, body) = server.post(&path, json!({"at": at, "input": input})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["session_id"], session, "{body}");
    body
}

/// Each TURN_STARTED's (turn, reason, input).
fn starts(events: &[Value]) -> Vec<(u64, Value, Value)> {
    (events.iter())
        .filter(|e| e["type"] == "TURN_STARTED")
        .map(|e| {
            let p = &e["payload"];
            (
                p["turn"].as_u64().unwrap(),
                p["reason"].clone(),
                p["input"].clone(),
            )
        })
        .collect()
}

fn fired(schedule: &Value) -> Value {
    json!({"kind": "schedule", "schedule_id": schedule["id"]})
}

#[tokio::test]
async fn a_schedule_fires_once_with_its_reason_and_a_deleted_one_never_fires() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    let session = idle_session(&server).await;
    let (deleted_input, first_input, second_input) = (
        json!({"sleep_ms": 1, "say": "deleted"}),
        json!({"sleep_ms": 1, "say": "first"}),
        json!({"sleep_ms": 1, "say": "second"}),
    );
    // Made in the order first, deleted, second; listed soonest first.
    let first = schedule(&server, &session, &from_now(2_500), first_input.clone()).await;
    let deleted = schedule(&server, &session, &from_now(2_000), deleted_input).await;
    let second = schedule(&server, &session, &from_now(4_000), second_input.clone()).await;
    let path = format!("/sessions/{session}/schedules");
    let (status, listed) = server.get(&path).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed, json!([deleted, first, second]));
    let deleted_path = format!("{path}/{}", deleted["id"].as_str().unwrap());
    // 204: it had not fired (firing takes it off the session).
    assert_eq!(server.delete(&deleted_path).await, 204);
    assert_eq!(server.delete(&deleted_path).await, 404);

    let events = server.journal(&session, 3).await;
    assert_eq!(
        starts(&events),
        [
            (1, json!({"kind": "input"}), json!({"sleep_ms": 1})),
            (2, fired(&first), first_input),
            (3, fired(&second), second_input),
        ]
    );
    let (_, listed) = server.get(&path).await;
    assert_eq!(listed, json!([]));
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(
        (record["status"].as_str(), record["turn"].as_u64()),
        (Some("idle"), Some(3)),
        "{record}"
    );
    // Counted in /metrics: two fired, two lateness samples.
    let metrics = server.metrics().await;
    assert_eq!(
        (
            sample(&metrics, "agenthost_schedules_fired_total"),
            sample(&metrics, "agenthost_schedule_lateness_seconds_count"),
        ),
        (2.0, 2.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_schedule_due_while_the_server_was_killed_fires_once_after_the_restart() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    let session = idle_session(&server).await;
    let input = json!({"sleep_ms": 1, "say": "while down"});
    let missed = schedule(&server, &session, &from_now(1_500), input.clone()).await;
    server.kill();
    // Down past its due time (a wait, not an assertion: it only has to be past due).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let server = Server::start(dir.path()).await;
    let events = server.journal(&session, 2).await;
    assert_eq!(starts(&events)[1..], [(2, fired(&missed), input.clone())]);
    // Another kill -9 and restart, then a later schedule: the missed one
    // did not fire again before it.
    server.kill();
    let server = Server::start(dir.path()).await;
    let later_input = json!({"sleep_ms": 1, "say": "later"});
    let later = schedule(&server, &session, &from_now(500), later_input.clone()).await;
    let events = server.journal(&session, 3).await;
    assert_eq!(
        starts(&events)[1..],
        [(2, fired(&missed), input), (3, fired(&later), later_input)]
    );
}

#[tokio::test]
async fn a_schedule_due_while_a_turn_runs_is_queued_and_runs_next() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["MESSAGE_DELTA"]).await;
    let input = json!({"sleep_ms": 1, "say": "queued"});
    let due = schedule(&server, &session, &from_now(200), input.clone()).await;
    // It fires into the queue of the busy session.
    let queued = stream.until(&["INPUT_QUEUED"]).await;
    let queued = queued.last().unwrap();
    assert_eq!(queued["payload"]["input"], input, "{queued}");
    let (status, body) = server
        .post(&format!("/sessions/{session}/cancel"), json!({}))
        .await;
    assert!(status == 200 || status == 202, "{status} {body}");
    let events = server.journal(&session, 2).await;
    assert_eq!(starts(&events)[1..], [(2, fired(&due), input)]);
    let (_, listed) = server.get(&format!("/sessions/{session}/schedules")).await;
    assert_eq!(listed, json!([]));
}

#[tokio::test]
async fn a_cron_schedule_fires_repeatedly_and_stops_when_deleted() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    let session = idle_session(&server).await;
    let path = format!("/sessions/{session}/schedules");
    let tick = json!({"sleep_ms": 1, "say": "tick"});
    let body = json!({"cron": "* * * * * *", "timezone": "Europe/Berlin", "input": tick});
    let (status, every) = server.post(&path, body).await;
    assert_eq!(status, 201, "{every}");
    assert_eq!(
        (every["cron"].as_str(), every["timezone"].as_str()),
        (Some("* * * * * *"), Some("Europe/Berlin"))
    );
    // Three firings, each a turn with its reason; it stays listed, due again.
    let events = server.journal(&session, 4).await;
    assert_eq!(
        starts(&events)[1..],
        [
            (2, fired(&every), tick.clone()),
            (3, fired(&every), tick.clone()),
            (4, fired(&every), tick.clone()),
        ]
    );
    let (_, listed) = server.get(&path).await;
    assert_eq!(listed[0]["id"], every["id"], "{listed}");
    let schedule_path = format!("{path}/{}", every["id"].as_str().unwrap());
    assert_eq!(server.delete(&schedule_path).await, 204);
    // Every firing before the delete is a turn or a queued input now; a
    // one-shot 2.5 s later (2 more seconds of a live cron) runs right after them.
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    let before = record["turn"].as_u64().unwrap() + record["queued_inputs"].as_u64().unwrap_or(0);
    let last = schedule(&server, &session, &from_now(2_500), json!({"sleep_ms": 1})).await;
    let mut stream = server.events(&session, None).await;
    let mut events = Vec::new();
    while !starts(&events)
        .iter()
        .any(|(_, reason, _)| *reason == fired(&last))
    {
        events.extend(stream.until(&["TURN_STARTED"]).await);
    }
    let starts = starts(&events);
    let (turn, _, _) = starts.last().unwrap();
    assert_eq!(*turn, before + 1, "{starts:?}");
    assert!(
        starts[1..starts.len() - 1]
            .iter()
            .all(|(_, reason, _)| *reason == fired(&every)),
        "{starts:?}"
    );
    let (_, listed) = server.get(&path).await;
    assert_eq!(listed, json!([]));
}

#[tokio::test]
async fn bad_times_ended_sessions_and_the_per_session_cap_are_refused() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    let session = idle_session(&server).await;
    let path = format!("/sessions/{session}/schedules");
    for at in ["tomorrow", "2099-12-01 09:00", "2099-12-01T09:00:00"] {
        let (status, body) = server.post(&path, json!({"at": at, "input": 1})).await;
        assert_eq!(status, 422, "{at}: {body}");
        assert_eq!(body["error"]["code"], "invalid_schedule", "{body}");
    }
    for bad in [
        json!({"input": 1}),
        json!({"at": "2099-12-01T09:00:00Z", "cron": "* * * * *"}),
        json!({"at": "2099-12-01T09:00:00Z", "timezone": "UTC"}),
        json!({"cron": "61 * * * *"}),
        json!({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}),
    ] {
        let (status, body) = server.post(&path, bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "invalid_schedule", "{body}");
    }
    // Any UTC offset; kept and shown in UTC.
    let berlin = schedule(&server, &session, "2099-12-01T09:00:00+02:00", json!(1)).await;
    assert_eq!(berlin["at"], "2099-12-01T07:00:00.000Z", "{berlin}");
    let (status, _) = server
        .post(
            "/sessions/00000000-0000-7000-8000-000000000000/schedules",
            json!({"at": "2099-12-01T09:00:00Z"}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(server.delete(&format!("{path}/not-a-uuid")).await, 404);

    // The cap: 100 schedules per session, then 429 and nothing added.
    for n in 1..100 {
        schedule(&server, &session, "2099-12-01T09:00:00Z", json!(n)).await;
    }
    let (status, body) = server
        .post(&path, json!({"at": "2099-12-01T09:00:00Z", "input": 101}))
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "too_many_schedules", "{body}");
    let (_, listed) = server.get(&path).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(100));

    // An ended session takes no schedule.
    let (status, body) = server
        .post(&format!("/sessions/{session}/end"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server
        .post(&path, json!({"at": "2099-12-01T09:00:00Z", "input": 1}))
        .await;
    assert_eq!(status, 409, "{body}");
    // Its 100 schedules were dropped when it ended: none is listed (or due).
    let (status, listed) = server.get(&path).await;
    assert_eq!((status, listed), (200, json!([])));
}
