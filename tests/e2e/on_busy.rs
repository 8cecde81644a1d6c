//! Input while a turn runs (`on_busy`): `enqueue` queues inputs that run
//! in order as turns of their own, bounded per session; `interrupt` cancels
//! the running turn and runs first; behind a pending approval `enqueue`
//! waits for the decision and `interrupt` is 409; a queued input survives a
//! `kill -9` and runs once after the restart. On both engines.

use serde_json::{Value, json};

use crate::support::{self, Server, types};

async fn slow_server() -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    (dir, server)
}

/// A session of `slow` whose first turn sleeps (for a minute) in the
/// middle of its message: busy until cancelled.
async fn busy_session(server: &Server) -> String {
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    server
        .events(&session, None)
        .await
        .until(&["MESSAGE_DELTA"])
        .await;
    session
}

async fn input(server: &Server, session: &str, body: Value) -> (u16, Value) {
    server
        .post(&format!("/sessions/{session}/input"), body)
        .await
}

/// POSTs `body` to `path` as `key` with one `Idempotency-Key` (random enough for an invocation key).
async fn post_keyed(server: &Server, key: &str, path: &str, body: &Value) -> (u16, Value) {
    let response = (server.client.post(server.url(path)))
        .bearer_auth(key)
        .header("Idempotency-Key", "q8Zr3kPwXy7TnL2vBc9HdJ4m")
        .json(body)
        .send()
        .await
        .unwrap();
    support::status_and_json(response).await
}

/// Each TURN_STARTED's (turn, input).
fn starts(events: &[Value]) -> Vec<(u64, Value)> {
    (events.iter())
        .filter(|e| e["type"] == "TURN_STARTED")
        .map(|e| {
            let payload = &e["payload"];
            (payload["turn"].as_u64().unwrap(), payload["input"].clone())
        })
        .collect()
}

/// The type of the event that ended each turn, with a TURN_ERROR's kind.
fn endings(events: &[Value]) -> Vec<String> {
    (events.iter())
        .filter_map(|e| match e["type"].as_str() {
            Some("TURN_ENDED") => Some("ended".to_string()),
            Some("TURN_ERROR") => Some(e["payload"]["kind"].as_str().unwrap().to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn enqueued_inputs_run_in_order_after_the_running_turn_and_the_queue_is_bounded() {
    let (_dir, server) = slow_server().await;
    let session = busy_session(&server).await;
    // The contract's default stands: 409 while a turn runs.
    let (status, body) = input(&server, &session, json!({"input": "x"})).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = input(
        &server,
        &session,
        json!({"input": "x", "on_busy": "reject"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = input(&server, &session, json!({"input": "x", "on_busy": "later"})).await;
    assert_eq!(status, 422, "{body}");
    // Sixteen queue (the documented bound), in order.
    let queued: Vec<Value> = (0..16).map(|n| json!({"sleep_ms": 1, "n": n})).collect();
    for (n, next) in queued.iter().enumerate() {
        let (status, body) = input(
            &server,
            &session,
            json!({"input": next, "on_busy": "enqueue"}),
        )
        .await;
        assert_eq!(status, 202, "{body}");
        assert_eq!(body["status"], "running", "{body}");
        assert_eq!(body["turn"], 1, "{body}");
        assert_eq!(body["queued"]["position"], n + 1, "{body}");
        assert!(
            body["queued"]["input_id"]
                .as_str()
                .unwrap()
                .starts_with("inq_")
        );
    }
    let (status, body) = input(
        &server,
        &session,
        json!({"input": "one too many", "on_busy": "enqueue"}),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "queue_full", "{body}");
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["queued_inputs"], 16, "{record}");
    // The running turn is cancelled; each queued input then runs once, in order.
    let (status, body) = server
        .post(&format!("/sessions/{session}/cancel"), json!({}))
        .await;
    assert!(status == 200 || status == 202, "{status} {body}");
    let events = server.journal(&session, 17).await;
    let started = starts(&events);
    let mut expected = vec![(1, json!({"sleep_ms": 60_000}))];
    expected.extend((2..).zip(queued.iter().cloned()));
    assert_eq!(started, expected);
    let mut ends = vec!["cancelled".to_string()];
    ends.extend(std::iter::repeat_n("ended".to_string(), 16));
    assert_eq!(endings(&events), ends);
    let queued_events = events.iter().filter(|e| e["type"] == "INPUT_QUEUED");
    let queued_inputs: Vec<Value> = queued_events
        .map(|e| e["payload"]["input"].clone())
        .collect();
    assert_eq!(queued_inputs, queued, "the refused one is not journaled");
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "idle", "{record}");
    assert_eq!(record["turn"], 17, "{record}");
    assert_eq!(record.get("queued_inputs"), None, "none left: {record}");
}

#[tokio::test]
async fn interrupt_cancels_the_running_turn_and_runs_before_the_queue() {
    let (_dir, server) = slow_server().await;
    let (_, invoke) = server.mint_key("invocation", "web", Some("slow")).await;
    let session = busy_session(&server).await;
    let path = format!("/sessions/{session}/input");
    let queued = json!({"sleep_ms": 1, "queued": true});
    let (status, body) = server
        .post_as(
            &invoke,
            &path,
            json!({"input": queued, "on_busy": "enqueue"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // Longer than a test host's lease (2 s): the interrupting turn starts
    // while the cancelled turn's runner still holds the session, and must
    // keep its lease on PostgreSQL after that runner lets go.
    let now = json!({"sleep_ms": 4000, "now": true});
    // The app's own invocation key may interrupt, as it may cancel; with
    // an Idempotency-Key, a retry answers the first 202 and does nothing.
    let interrupt = json!({"input": now, "on_busy": "interrupt"});
    let (status, body) = post_keyed(&server, &invoke, &path, &interrupt).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["queued"]["position"], 1, "{body}");
    let events = server.journal(&session, 3).await;
    assert_eq!(
        starts(&events),
        [
            (1, json!({"sleep_ms": 60_000})),
            (2, now.clone()),
            (3, queued.clone())
        ]
    );
    assert_eq!(endings(&events), ["cancelled", "ended", "ended"]);
    let error = events.iter().find(|e| e["type"] == "TURN_ERROR").unwrap();
    let message = error["payload"]["message"].as_str().unwrap();
    assert!(message.contains("interrupting"), "{message}");
    let flags: Vec<&Value> = (events.iter())
        .filter(|e| e["type"] == "INPUT_QUEUED")
        .map(|e| &e["payload"])
        .collect();
    assert_eq!(flags.len(), 2, "{flags:?}");
    assert_eq!(flags[0].get("interrupt"), None, "{:?}", flags[0]);
    assert_eq!(flags[1]["interrupt"], true, "{:?}", flags[1]);
    // Nothing runs between the cancelled turn's end and the interrupting input.
    let after_error: Vec<&str> = (events.iter())
        .skip_while(|e| e["type"] != "TURN_ERROR")
        .skip(1)
        .take(1)
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(after_error, ["TURN_STARTED"]);
    let (status, retried) = post_keyed(&server, &invoke, &path, &interrupt).await;
    assert_eq!((status, &retried), (202, &body));
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(
        (record["status"].as_str(), record["turn"].as_u64()),
        (Some("idle"), Some(3))
    );
    // An idle session takes either mode as a plain input.
    let (status, body) = input(
        &server,
        &session,
        json!({"input": {"sleep_ms": 1}, "on_busy": "interrupt"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["turn"], 4, "{body}");
    assert_eq!(body.get("queued"), None, "{body}");
}

#[tokio::test]
async fn behind_a_pending_approval_enqueue_waits_for_the_decision_and_interrupt_is_409() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let component = support::guest("ops");
    let manifest = "[app]\nslug = \"ops\"\n[agent]\nentry = \"ops.wasm\"\n";
    server
        .deploy_files(&[("ops.wasm", &component)], manifest)
        .await;
    let session = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    server.journal(&session, 1).await;
    let (status, body) = input(&server, &session, json!({"input": "delete apples"})).await;
    assert_eq!(status, 202, "{body}");
    let mut stream = server.events(&session, None).await;
    let suspended = stream
        .until(&["TOOL_APPROVAL_REQUIRED", "TURN_ERROR"])
        .await;
    assert_eq!(suspended.last().unwrap()["type"], "TOOL_APPROVAL_REQUIRED");
    let (status, body) = input(
        &server,
        &session,
        json!({"input": "delete pears", "on_busy": "interrupt"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("decide it first"),
        "{body}"
    );
    let (status, body) = input(
        &server,
        &session,
        json!({"input": "add figs", "on_busy": "enqueue"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "awaiting_approval", "{body}");
    // Nothing runs until the decision; then the resumed turn, then the queued input.
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "awaiting_approval", "{record}");
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/approval"),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // Three endings: the first turn, the resumed one (the suspended turn
    // has none), and the queued input's.
    let events = server.journal(&session, 3).await;
    let kinds: Vec<String> = (events.iter())
        .filter(|e| e["type"] == "TURN_STARTED")
        .map(|e| e["payload"]["reason"]["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["input", "input", "approval_decision", "input"]);
    let last = starts(&events).pop().unwrap();
    assert_eq!(last, (4, json!("add figs")));
    let last_types = types(&events[events.len() - 2..]);
    assert_eq!(last_types, ["MESSAGE_END", "TURN_ENDED"], "{events:#?}");
    let text = (events.iter())
        .rfind(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .map(|e| e["payload"]["text"].as_str().unwrap().to_string());
    assert_eq!(text.as_deref(), Some("Added figs. Records: pears, figs."));
}

#[tokio::test]
async fn a_queued_input_survives_kill_9_and_runs_once_after_the_restart() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    let session = busy_session(&server).await;
    let queued = json!({"sleep_ms": 1, "after": "the crash"});
    let (status, body) = input(
        &server,
        &session,
        json!({"input": queued, "on_busy": "enqueue"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    // Committed before the 202: killed now, the queue is all that is left of it.
    server.kill();
    let server = Server::start(dir.path()).await;
    let events = server.journal(&session, 2).await;
    assert_eq!(
        starts(&events),
        [(1, json!({"sleep_ms": 60_000})), (2, queued.clone())]
    );
    assert_eq!(endings(&events), ["host_restarted", "ended"]);
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "idle", "{record}");
    assert_eq!(record["turn"], 2, "ran once: {record}");
    // A second restart finds nothing to run again.
    server.kill();
    let server = Server::start(dir.path()).await;
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(
        (record["status"].as_str(), record["turn"].as_u64()),
        (Some("idle"), Some(2))
    );
    let (status, body) = input(&server, &session, json!({"input": {"sleep_ms": 1}})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["turn"], 3, "{body}");
}
