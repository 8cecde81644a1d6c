//! App-level schedules (docs/schedules.md): `POST /apps/{id}/schedules`
//! creates a new session per firing, whose first TURN_STARTED says reason
//! `schedule`; a one-shot one fires once and a deleted one never; a cron
//! one with `end_at` fires until its end and is then gone (so does a
//! session's); one whose route the app does not serve is missed (counted
//! in /metrics), never retried; one due at the app's running-turns cap
//! waits, each try counted in /metrics, and fires when a turn ends. On
//! both engines.
//!
//! "Never fired" and "fired once" are shown by order: a later schedule's
//! session is awaited, and the sessions up to it are exactly those expected.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, Server, from_now, sample};

async fn slow_server(dir: &tempfile::TempDir) -> Server {
    let server = Server::start(dir.path()).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    server
}

async fn schedule(server: &Server, body: Value) -> Value {
    let (status, created) = server.post("/apps/slow/schedules", body).await;
    assert_eq!(status, 201, "{created}");
    created
}

/// Each session of `slow` a schedule created: (schedule id, input), oldest first.
async fn scheduled_sessions(server: &Server) -> Vec<(String, Value)> {
    let (status, page) = server.get("/sessions?app=slow&limit=500").await;
    assert_eq!(status, 200, "{page}");
    let mut out = Vec::new();
    for session in page["items"].as_array().unwrap().iter().rev() {
        let id = session["session_id"].as_str().unwrap();
        let first = server.events(id, None).await.until(&["TURN_STARTED"]).await;
        let started = &first.last().unwrap()["payload"];
        if started["reason"]["kind"] == "schedule" {
            assert_eq!(started["turn"], 1, "{started}");
            let schedule = started["reason"]["schedule_id"].as_str().unwrap();
            out.push((schedule.to_string(), started["input"].clone()));
        }
    }
    out
}

/// Waits (a bound, not an assertion of time) until `done` holds of the scheduled sessions.
async fn until(server: &Server, done: impl Fn(&[(String, Value)]) -> bool) -> Vec<(String, Value)> {
    let start = Instant::now();
    loop {
        let sessions = scheduled_sessions(server).await;
        if done(&sessions) {
            return sessions;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{sessions:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn listed(server: &Server, path: &str) -> Value {
    let (status, body) = server.get(path).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn an_app_schedule_creates_a_session_once_and_a_deleted_one_none() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    let input = |say| json!({"sleep_ms": 1, "say": say});
    let once = schedule(
        &server,
        json!({"route": "/slow", "at": from_now(1_000), "input": input("once")}),
    )
    .await;
    assert_eq!(once["route"], "/slow");
    let deleted = schedule(
        &server,
        json!({"route": "/slow", "at": from_now(1_500), "input": input("deleted")}),
    )
    .await;
    let sentinel = schedule(
        &server,
        json!({"route": "/slow", "at": from_now(3_000), "input": input("sentinel")}),
    )
    .await;
    let ids = |v: &Value| v["id"].as_str().unwrap().to_string();
    assert_eq!(
        listed(&server, "/apps/slow/schedules").await,
        json!([once, deleted, sentinel])
    );
    let path = format!("/apps/slow/schedules/{}", ids(&deleted));
    assert_eq!(server.delete(&path).await, 204);
    assert_eq!(server.delete(&path).await, 404);
    let sessions = until(&server, |s| s.iter().any(|(id, _)| *id == ids(&sentinel))).await;
    assert_eq!(
        sessions,
        [
            (ids(&once), input("once")),
            (ids(&sentinel), input("sentinel"))
        ]
    );
    assert_eq!(listed(&server, "/apps/slow/schedules").await, json!([]));
    // Refused: an unknown app, both times, `end_at` on a one-shot schedule.
    let (status, body) = server
        .post(
            "/apps/nope/schedules",
            json!({"route": "/slow", "at": from_now(0)}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    for body in [
        json!({"route": "/slow", "at": from_now(0), "cron": "* * * * * *"}),
        json!({"route": "/slow", "at": from_now(0), "end_at": from_now(1_000)}),
    ] {
        let (status, answer) = server.post("/apps/slow/schedules", body).await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["code"], "invalid_schedule");
    }
}

#[tokio::test]
async fn cron_schedules_with_an_end_stop_and_a_missing_route_is_missed() {
    let dir = support::data_dir();
    let server = slow_server(&dir).await;
    // Every second until 2.5 s from now: a few sessions, then it is gone.
    let tick = json!({"sleep_ms": 1, "say": "tick"});
    let every = schedule(
        &server,
        json!({"route": "/slow", "cron": "* * * * * *", "end_at": from_now(2_500), "input": tick}),
    )
    .await;
    assert!(every["end_at"].is_string(), "{every}");
    // A session's cron schedule with an end stops too.
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 1}))
        .await;
    let path = format!("/sessions/{session}/schedules");
    let (status, body) = server
        .post(
            &path,
            json!({"cron": "* * * * * *", "end_at": from_now(2_500), "input": {"sleep_ms": 1}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // A route the app does not serve: missed, not retried.
    schedule(&server, json!({"route": "/nope", "at": from_now(0)})).await;
    let start = Instant::now();
    while listed(&server, "/apps/slow/schedules").await != json!([])
        || listed(&server, &path).await != json!([])
    {
        assert!(start.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ticks = scheduled_sessions(&server).await;
    assert!(!ticks.is_empty());
    assert!(
        ticks
            .iter()
            .all(|(id, _)| id == every["id"].as_str().unwrap()),
        "{ticks:?}"
    );
    // A later schedule's session: no tick came after the end.
    let last = schedule(
        &server,
        json!({"route": "/slow", "at": from_now(1_000), "input": {"sleep_ms": 1}}),
    )
    .await;
    let sessions = until(&server, |s| {
        s.iter().any(|(id, _)| id == last["id"].as_str().unwrap())
    })
    .await;
    assert_eq!(sessions.len(), ticks.len() + 1, "{sessions:?}");
    let (_, fired_on_session) = server.get(&format!("/sessions/{session}")).await;
    assert!(
        fired_on_session["turn"].as_u64().unwrap() >= 2,
        "{fired_on_session}"
    );
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("agenthost_schedules_missed_total 1\n"),
        "{metrics}"
    );
}

/// A schedule due while the app is at its running-turns cap waits, each
/// try counted in /metrics (`agenthost_schedules_deferred_total`), and
/// fires once a turn ends.
#[tokio::test]
async fn a_schedule_due_at_the_running_turns_cap_waits_counted_then_fires() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--max-running-turns-per-app", "1"]).await;
    server.deploy("slow", &support::guest("slow")).await;
    let idle = server
        .session("slow", "/slow", json!({"sleep_ms": 1}))
        .await;
    (server.events(&idle, None).await)
        .until(&["TURN_ENDED"])
        .await;
    // The app's one running turn.
    let busy = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    (server.events(&busy, None).await)
        .until(&["MESSAGE_DELTA"])
        .await;
    let path = format!("/sessions/{idle}/schedules");
    let body = json!({"at": from_now(0), "input": {"sleep_ms": 1, "say": "waited"}});
    let (status, due) = server.post(&path, body).await;
    assert_eq!(status, 201, "{due}");
    // Tried and put off, counted: not fired, still listed.
    let start = Instant::now();
    while sample(
        &server.metrics().await,
        "agenthost_schedules_deferred_total",
    ) < 2.0
    {
        assert!(start.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed(&server, &path).await, json!([due]));
    // The running turn ends: the schedule fires on the idle session.
    let (status, body) = server
        .post(&format!("/sessions/{busy}/cancel"), json!({}))
        .await;
    assert!(status == 200 || status == 202, "{status} {body}");
    let mut stream = server.events(&idle, None).await;
    stream.until(&["TURN_ENDED"]).await;
    let second = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let started = &second[0]["payload"];
    assert_eq!(started["reason"]["schedule_id"], due["id"], "{started}");
    assert_eq!(listed(&server, &path).await, json!([]));
}
