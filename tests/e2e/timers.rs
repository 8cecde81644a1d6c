//! Timers from inside the agent (docs/schedules.md): in Rust, Python and
//! TypeScript (`tests/fixtures/timers` and its twins), an agent schedules
//! a follow-up a few seconds ahead and it runs once, as a turn whose
//! TURN_STARTED says reason `schedule`, after the TURN_SCHEDULED of the
//! turn that made it; a cancelled timer (by a later turn, or in the turn
//! that made it) never fires; a turn that fails after scheduling schedules
//! nothing; a timer pending when the server is killed (`kill -9`) fires
//! once after the restart. On both engines. An agent's timers on an end
//! user's session fire as that user's turns (review N6: one input made 59
//! turns in 15 s under a 2-a-minute quota).
//!
//! "Never fired" and "fired once" are shown by order, not by waiting: a
//! later timer's turn is awaited, and the journal up to it holds exactly
//! the schedule turns expected.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::agents::{self, said};
use crate::support::{self, Server, types};

/// The three fixtures.
#[derive(Clone, Copy)]
enum Lang {
    Rust,
    Python,
    TypeScript,
}

impl Lang {
    fn slug(self) -> &'static str {
        match self {
            Lang::Rust => "timers",
            Lang::Python => "timers-py",
            Lang::TypeScript => "timers-ts",
        }
    }

    /// A server for this language's agent (the interpreters share the
    /// tests' compile cache).
    async fn server(self, dir: &std::path::Path) -> Server {
        match self {
            Lang::Rust => Server::start(dir).await,
            Lang::Python | Lang::TypeScript => agents::server(dir, &[]).await,
        }
    }

    async fn deploy(self, server: &Server) {
        let row = match self {
            Lang::Rust => server.deploy("timers", &support::guest("timers")).await,
            Lang::Python => {
                let component = crate::python::python_guest("tests/fixtures/python/timers");
                deploy_built(server, component, "timers-py", "python").await
            }
            Lang::TypeScript => {
                let component =
                    crate::typescript::typescript_guest("tests/fixtures/typescript/timers");
                deploy_built(server, component, "timers-ts", "typescript").await
            }
        };
        assert_eq!(row["status"], "active", "{row}");
    }
}

async fn deploy_built(server: &Server, component: Arc<Vec<u8>>, slug: &str, lang: &str) -> Value {
    agents::deploy(server, &component, &agents::manifest(slug, lang, "")).await
}

/// Sends `input` to the idle `session` and returns its turn's events.
async fn turn(server: &Server, session: &str, input: Value) -> Vec<Value> {
    let mut stream = server.events(session, None).await;
    // Skip what is journaled already: the new turn is the next one.
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    let number = record["turn"].as_u64().unwrap() + 1;
    let path = format!("/sessions/{session}/input");
    let (status, body) = server.post(&path, json!({"input": input})).await;
    assert_eq!(status, 202, "{body}");
    loop {
        let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
        let last = events.last().unwrap();
        if last["payload"]["turn"].as_u64() == Some(number) {
            let from = (events.iter())
                .position(|e| e["type"] == "TURN_STARTED" && e["payload"]["turn"] == number)
                .unwrap_or(0);
            return events[from..].to_vec();
        }
    }
}

/// The id an agent's `scheduled <id>` names.
fn scheduled_id(events: &[Value]) -> String {
    let said = said(events);
    let id = said.first().and_then(|s| s.strip_prefix("scheduled "));
    id.unwrap_or_else(|| panic!("not scheduled: {said:?}"))
        .to_string()
}

/// The (schedule id, input) of every TURN_STARTED with reason `schedule`, in order.
fn schedule_turns(events: &[Value]) -> Vec<(String, Value)> {
    (events.iter())
        .filter(|e| e["type"] == "TURN_STARTED" && e["payload"]["reason"]["kind"] == "schedule")
        .map(|e| {
            let p = &e["payload"];
            let id = p["reason"]["schedule_id"].as_str().unwrap().to_string();
            (id, p["input"].clone())
        })
        .collect()
}

async fn listed(server: &Server, session: &str) -> Vec<String> {
    let (status, body) = server.get(&format!("/sessions/{session}/schedules")).await;
    assert_eq!(status, 200, "{body}");
    (body.as_array().unwrap().iter())
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// The whole story in one language: follow-up, cancel, failure, cancel of
/// its own, then a kill -9 with a timer pending.
async fn timers_fire_once_and_only_when_kept(lang: Lang) {
    let dir = support::data_dir();
    let server = lang.server(dir.path()).await;
    lang.deploy(&server).await;

    // Turn 1 schedules a follow-up 2 s ahead: TURN_SCHEDULED just before TURN_ENDED.
    let follow_up = json!({"say": "follow-up"});
    let first = json!({"schedule_ms": 2_000, "then": follow_up});
    let session = server.session(lang.slug(), "/timers", first).await;
    let events = server.journal(&session, 1).await;
    let follow_id = scheduled_id(&events);
    let n = events.len();
    assert_eq!(types(&events)[n - 2..], ["TURN_SCHEDULED", "TURN_ENDED"]);
    let payload = &events[n - 2]["payload"];
    assert_eq!(payload["schedule_id"], follow_id.as_str(), "{payload}");
    assert_eq!(payload["input"], follow_up, "{payload}");
    // It fires as turn 2, with the schedule's reason and input.
    let events = server.journal(&session, 2).await;
    assert_eq!(
        schedule_turns(&events),
        [(follow_id.clone(), follow_up.clone())]
    );
    let last_turn = events.last().unwrap();
    assert_eq!(last_turn["type"], "TURN_ENDED", "{last_turn}");
    assert_eq!(said(&events).last().unwrap(), "ran follow-up");

    // Turn 3 schedules one; turn 4 cancels it (journaled in turn 4's commit).
    let doomed = json!({"schedule_ms": 4_000, "then": {"say": "cancelled"}});
    let doomed_id = scheduled_id(&turn(&server, &session, doomed).await);
    assert_eq!(
        listed(&server, &session).await,
        std::slice::from_ref(&doomed_id)
    );
    let events = turn(&server, &session, json!({"cancel": doomed_id})).await;
    assert_eq!(said(&events), ["cancelled true"]);
    let n = events.len();
    assert_eq!(
        types(&events)[n - 2..],
        ["TURN_SCHEDULE_CANCELLED", "TURN_ENDED"]
    );
    assert_eq!(events[n - 2]["payload"]["schedule_id"], doomed_id.as_str());
    assert_eq!(listed(&server, &session).await, Vec::<String>::new());
    // Cancelling it again: nothing was pending.
    let events = turn(&server, &session, json!({"cancel": doomed_id})).await;
    assert_eq!(said(&events), ["cancelled false"]);

    // Turn 6 schedules, then fails before its commit: nothing scheduled.
    let failing = json!({"schedule_ms": 1_000, "then": {"say": "failed"}, "fail": true});
    let events = turn(&server, &session, failing).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ERROR", "{events:?}");
    assert!(!types(&events).contains(&"TURN_SCHEDULED"), "{events:?}");
    // Turn 7 schedules and cancels its own: nothing journaled, nothing scheduled.
    let own = json!({"schedule_ms": 1_000, "then": {"say": "own"}, "cancel_own": true});
    let events = turn(&server, &session, own).await;
    assert_eq!(said(&events), ["cancelled own true"]);
    assert!(
        !types(&events)
            .iter()
            .any(|t| t.starts_with("TURN_SCHEDULE"))
    );
    assert_eq!(listed(&server, &session).await, Vec::<String>::new());

    // A sentinel due after all of those: by the time it fires, any of them would have.
    let sentinel = json!({"say": "sentinel"});
    let events = turn(
        &server,
        &session,
        json!({"schedule_ms": 6_000, "then": sentinel}),
    )
    .await;
    let sentinel_id = scheduled_id(&events);
    let events = server.journal(&session, 9).await;
    assert_eq!(
        schedule_turns(&events),
        [
            (follow_id.clone(), follow_up.clone()),
            (sentinel_id.clone(), sentinel.clone())
        ]
    );

    // A timer pending when the server is killed fires once after the restart.
    let restart = json!({"say": "after the restart"});
    let events = turn(
        &server,
        &session,
        json!({"schedule_ms": 3_000, "then": restart}),
    )
    .await;
    let restart_id = scheduled_id(&events);
    assert_eq!(
        listed(&server, &session).await,
        std::slice::from_ref(&restart_id)
    );
    server.kill();
    let server = lang.server(dir.path()).await;
    let events = server.journal(&session, 11).await;
    assert_eq!(
        schedule_turns(&events),
        [
            (follow_id.clone(), follow_up.clone()),
            (sentinel_id.clone(), sentinel.clone()),
            (restart_id.clone(), restart.clone()),
        ]
    );
    assert_eq!(said(&events).last().unwrap(), "ran after the restart");
    assert_eq!(listed(&server, &session).await, Vec::<String>::new());
    // Killed again and restarted, a last timer: the one before did not fire again.
    server.kill();
    let server = lang.server(dir.path()).await;
    let last = json!({"say": "last"});
    turn(&server, &session, json!({"schedule_ms": 500, "then": last})).await;
    let events = server.journal(&session, 13).await;
    let fired: Vec<String> = schedule_turns(&events)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(fired.len(), 4, "{fired:?}");
    assert_eq!(fired[..3], [follow_id, sentinel_id, restart_id]);
}

#[tokio::test]
async fn rust_timers_fire_once_and_only_when_kept() {
    timers_fire_once_and_only_when_kept(Lang::Rust).await;
}

#[tokio::test]
async fn python_timers_fire_once_and_only_when_kept() {
    timers_fire_once_and_only_when_kept(Lang::Python).await;
}

#[tokio::test]
async fn typescript_timers_fire_once_and_only_when_kept() {
    timers_fire_once_and_only_when_kept(Lang::TypeScript).await;
}

/// Review N6: an agent that sets its next timer at `after-ms` 0 from every
/// turn ran 59 turns in 15 s from one input of an end user whose share is
/// 2 turns a minute. Its timers now fire as that user's turns: the first
/// is her second of the minute, then her share is spent, for her own input
/// and for the next timer alike (it stays pending).
#[tokio::test]
async fn an_agents_timers_on_an_end_users_session_count_against_her_share() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--min-timer-delay", "10ms"]).await;
    let manifest = "[app]\nslug = \"looper\"\n[agent]\nentry = \"agent.wasm\"\n\
                    [end_users]\nturns_per_minute_per_user = 2\n";
    (server.deploy_files(&[("agent.wasm", &support::guest("timers"))], manifest)).await;
    let ada = server.end_user_token("looper", "ada").await;
    // One input whose every turn schedules the next at once, five deep.
    let mut input = json!({"say": "the end"});
    for _ in 0..5 {
        input = json!({"schedule_ms": 0, "then": input});
    }
    let body = json!({"app": "looper", "route": "/timers", "input": input});
    let (status, created) = server.post_as(&ada, "/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    let mut stream = server.events(&session, None).await;
    loop {
        let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
        let last = events.last().unwrap();
        assert_eq!(last["type"], "TURN_ENDED", "{events:?}");
        if last["payload"]["turn"] == 2 {
            break;
        }
    }
    // Her share is spent: her own input is refused...
    let path = format!("/sessions/{session}/input");
    let (status, body) = (server.post_as(&ada, &path, json!({"input": {"say": "me"}}))).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("quota_exceeded")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("turns_per_minute_per_user"), "{message}");
    // ...and the timer turn 2 set waits, due, instead of running turn 3.
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["turn"], 2, "{record}");
    assert_eq!(listed(&server, &session).await.len(), 1);
}
