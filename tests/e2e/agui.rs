//! AG-UI (docs/ag-ui.md): the real `@ag-ui/client` HttpAgent
//! (tests/ag-ui/client.mjs, installed by scripts/prereqs/45-ag-ui.sh, found
//! through `AGENTHOST_AG_UI_CLIENT`) runs a thread on `examples/ops` against
//! the real server: replies with tool calls and results, a second run that
//! carries the first, a gated call that ends a run with an interrupt, the
//! resume that approves it; then reads the thread back from the AG-UI form
//! of the events endpoint, dropped and resumed with Last-Event-ID. The
//! client's own verification runs on every event. Then the binding's edges
//! over plain HTTP: keys, refusals, bad input, resumption ids.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::idp::{Idp, claims, now};
use crate::support::{self, KEY, Server, types};

fn client_dir() -> PathBuf {
    match std::env::var_os("AGENTHOST_AG_UI_CLIENT") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "AGENTHOST_AG_UI_CLIENT is not set: the AG-UI tests run the real @ag-ui/client \
             (run scripts/test, or `source scripts/prereqs/45-ag-ui.sh`, which installs it \
             in tests/ag-ui and exports AGENTHOST_AG_UI_CLIENT)"
        ),
    }
}

async fn ops_server() -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("ops", &support::guest("ops")).await;
    (dir, server)
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The text of the run's assistant messages, concatenated per message.
fn replies(events: &[Value]) -> Vec<String> {
    of_type(events, "TEXT_MESSAGE_START")
        .iter()
        .map(|start| {
            let id = &start["messageId"];
            (events.iter())
                .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT" && e["messageId"] == *id)
                .map(|e| e["delta"].as_str().unwrap())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn the_ag_ui_client_runs_a_thread_and_reads_it_back() {
    let dir = client_dir();
    let (_data, server) = ops_server().await;
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(dir.join("client.mjs"))
            .args([&url, KEY, "ops", "/ops"])
            .output()
            .expect("run node")
    })
    .await
    .expect("wait for node");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    assert_eq!(report["error"], Value::Null, "{}", report["error"]);
    // The client stripped nothing and warned of nothing: every event is AG-UI's.
    assert_eq!(report["warnings"], json!([]));
    let runs: Vec<&Vec<Value>> = (report["runs"].as_array().unwrap().iter())
        .map(|run| run["events"].as_array().unwrap())
        .collect();
    assert_eq!(runs.len(), 4);

    // Run 1: two tool calls with their results, then the reply; the user
    // message the client sent is not echoed.
    let first = runs[0];
    assert_eq!(
        types(first),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
        ][..],
        "{first:?}"
    );
    let calls = of_type(first, "TOOL_CALL_START");
    assert_eq!(calls[0]["toolCallName"], "add_record");
    let args = of_type(first, "TOOL_CALL_ARGS");
    assert_eq!(args[0]["delta"], json!({"name": "apples"}).to_string());
    let results = of_type(first, "TOOL_CALL_RESULT");
    assert_eq!(results[0]["toolCallId"], calls[0]["toolCallId"]);
    assert_eq!(
        results[0]["content"],
        json!({"added": "apples"}).to_string()
    );
    assert_eq!(results[1]["content"], json!({"added": "pears"}).to_string());
    assert_eq!(results[0]["metadata"]["agenthost"]["status"], "ok");
    assert_eq!(
        replies(first),
        ["Added apples. Added pears. Records: apples, pears."]
    );
    assert_eq!(report["runs"][0]["outcome"], json!({"type": "success"}));
    let started = &first[0];
    let session = started["metadata"]["agenthost"]["session_id"]
        .as_str()
        .unwrap();
    assert_eq!(started["metadata"]["agenthost"]["turn"], 1);

    // Run 2, same thread: the session kept the records of run 1.
    assert_eq!(replies(runs[1]), ["Records: apples, pears."]);
    assert_eq!(runs[1][0]["metadata"]["agenthost"]["session_id"], session);
    assert_eq!(runs[1][0]["threadId"], first[0]["threadId"]);
    assert_ne!(runs[1][0]["runId"], first[0]["runId"]);

    // Run 3: the gated call ends the run with an AG-UI interrupt.
    let third = runs[2];
    assert_eq!(
        types(third),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_FINISHED"
        ][..]
    );
    let outcome = &report["runs"][2]["outcome"];
    assert_eq!(outcome["type"], "interrupt");
    let interrupt = &outcome["interrupts"][0];
    let gated = of_type(third, "TOOL_CALL_START")[0]["toolCallId"].clone();
    assert_eq!(interrupt["toolCallId"], gated);
    assert_eq!(interrupt["reason"], "tool_call");
    assert_eq!(interrupt["message"], "the user asked to delete apples");
    assert_eq!(interrupt["metadata"]["agenthost"]["name"], "delete_record");
    assert_eq!(interrupt["responseSchema"]["required"], json!(["approved"]));
    // The client refuses a run that leaves the interrupt unanswered.
    let refused = report["unansweredRun"].as_str().unwrap();
    assert!(refused.contains("pending interrupt"), "{refused}");

    // Run 4, the resume: the gated call's result (no new TOOL_CALL_START),
    // then the reply.
    let fourth = runs[3];
    assert_eq!(
        types(fourth),
        [
            "RUN_STARTED",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ][..]
    );
    assert_eq!(fourth[1]["toolCallId"], gated);
    assert_eq!(
        fourth[1]["content"],
        json!({"deleted": "apples"}).to_string()
    );
    assert_eq!(replies(fourth), ["Deleted apples. Records: pears."]);
    let reason = &fourth[0]["metadata"]["agenthost"]["reason"];
    assert_eq!(reason["kind"], "approval_decision");
    assert_eq!(reason["approved"], true);
    assert_eq!(reason["approver"], "alice");
    // The client's conversation: its own user messages, the calls and
    // their results, the replies.
    let messages = report["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| **r == "user").count(),
        3,
        "{roles:?}"
    );
    assert_eq!(
        roles.iter().filter(|r| **r == "tool").count(),
        3,
        "{roles:?}"
    );
    assert_eq!(
        messages.last().unwrap()["content"],
        "Deleted apples. Records: pears."
    );

    // The server's side: one session, four turns, the decision journaled
    // with the approver the resume named and the key that sent it.
    let (status, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["status"].as_str(), view["turn"].as_u64()),
        (Some("idle"), Some(4))
    );
    let mut stream = server.events(session, None).await;
    let mut journal = Vec::new();
    for _ in 0..3 {
        journal.extend(stream.until(&["TURN_ENDED"]).await);
    }
    let granted = of_type(&journal, "TOOL_APPROVAL_GRANTED");
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0]["payload"]["approver"], "alice");
    assert_eq!(granted[0]["payload"]["key_id"], "bootstrap");

    // The thread read back from the events endpoint's AG-UI form: four
    // runs, user messages included, through the client's verification.
    let whole = report["whole"]["frames"].as_array().unwrap();
    let whole_events: Vec<Value> = whole.iter().map(|f| f["event"].clone()).collect();
    assert_eq!(of_type(&whole_events, "RUN_STARTED").len(), 4);
    assert_eq!(of_type(&whole_events, "RUN_FINISHED").len(), 4);
    let starts = of_type(&whole_events, "TEXT_MESSAGE_START");
    assert_eq!(starts.iter().filter(|e| e["role"] == "user").count(), 3);
    assert_eq!(report["whole"]["connections"], 1);
    // Dropped twice, the first time between a tool call's frames, and
    // resumed with Last-Event-ID: the same frames, none lost or repeated.
    let resumed = report["resumed"]["frames"].as_array().unwrap();
    assert_eq!(report["resumed"]["connections"], 3);
    assert_eq!(resumed, whole);
    let drop_at = report["dropAt"][0].as_u64().unwrap() as usize;
    let cut = whole[drop_at - 1]["id"].as_str().unwrap();
    assert!(
        cut.ends_with(":0"),
        "dropped after a tool call's first frame: {cut}"
    );
    let reader_said: Vec<&Value> = (report["resumed"]["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m.get("content"))
        .collect();
    assert!(
        reader_said.contains(&&json!("Deleted apples. Records: pears.")),
        "{reader_said:?}"
    );
}

/// Two end users of one app, each with a JWT of the app's identity
/// provider, run the real client on the same threadId (the review's H1):
/// each gets a session of their own, Bob's agent never sees Ada's card
/// number, Bob cannot read Ada's session, and an expired token is refused.
#[tokio::test]
async fn the_ag_ui_client_runs_as_each_end_user_with_their_jwt() {
    let dir = client_dir();
    let idp = Idp::start();
    let data = support::data_dir();
    let server = Server::start_with(data.path(), &["--allow-insecure-jwks"]).await;
    idp.deploy_hello(&server, "shop", "shop-api").await;
    let ada = idp.token("ada", "shop-api").await;
    let bob = idp.token("bob", "shop-api").await;
    let mut stale = claims("ada", "shop-api");
    stale["exp"] = json!(now() - 120);
    let expired = idp.sign("rsa1", "RS256", stale).await;
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(dir.join("users.mjs"))
            .args([&url, "shop", "/chat", "order-1234", &ada, &bob, &expired])
            .output()
            .expect("run node")
    })
    .await
    .expect("wait for node");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    assert_eq!(report["error"], Value::Null, "{}", report["error"]);

    let (ada1, bob1, ada2) = (&report["ada1"], &report["bob1"], &report["ada2"]);
    for run in [ada1, bob1, ada2] {
        assert_eq!(run["last"], "RUN_FINISHED", "{report}");
    }
    assert!(ada1["session"].is_string(), "{report}");
    assert_ne!(
        ada1["session"], bob1["session"],
        "one thread, two users: {report}"
    );
    assert_eq!(
        ada1["session"], ada2["session"],
        "Ada's thread goes on: {report}"
    );
    assert_eq!(
        bob1["reply"], "You have not said anything before.",
        "{report}"
    );
    assert_eq!(
        ada2["reply"], "Before, you said: \"my card number is 4111\"",
        "{report}"
    );
    assert_eq!(report["bobReadsAda"]["status"], 404, "{report}");
    assert!(
        !report["bobReadsAda"]["body"].to_string().contains("4111"),
        "{report}"
    );
    let refused = report["expired"]["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("401") && refused.contains("token_expired"),
        "{report}"
    );
    // The client warned of nothing but that refusal: every event was AG-UI's.
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(
        warnings[0].to_string().contains("token_expired"),
        "{report}"
    );
}

/// POSTs a RunAgentInput; returns the status and the SSE frames' events.
async fn run(server: &Server, key: &str, path: &str, body: Value) -> (u16, Vec<Value>) {
    let response = server
        .client
        .post(server.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    if status != 200 {
        return (
            status,
            vec![serde_json::from_str(&text).expect("JSON error")],
        );
    }
    let events = (text.split("\n\n"))
        .flat_map(|frame| frame.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("JSON event"))
        .collect();
    (status, events)
}

fn input(thread: &str, text: &str) -> Value {
    json!({
        "threadId": thread,
        "runId": format!("run-{text}"),
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    })
}

#[tokio::test]
async fn the_ag_ui_binding_refuses_what_it_cannot_run() {
    let (_data, server) = ops_server().await;
    let path = "/ag-ui/ops/ops";

    // A thread per (app, route, threadId); a new thread is a new session.
    let (status, events) = run(&server, KEY, path, input("t1", "add figs")).await;
    assert_eq!(status, 200);
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    assert_eq!(events[0]["runId"], "run-add figs");
    let s1 = events[0]["metadata"]["agenthost"]["session_id"].clone();
    let (_, events) = run(&server, KEY, path, input("t2", "list")).await;
    assert_ne!(events[0]["metadata"]["agenthost"]["session_id"], s1);
    assert_eq!(replies(&events), ["Records: none."]);

    // A gated call pending: new input is a RUN_ERROR, as AG-UI asks.
    let (_, events) = run(&server, KEY, path, input("t1", "delete figs")).await;
    let interrupt = events.last().unwrap()["outcome"]["interrupts"][0].clone();
    let (status, events) = run(&server, KEY, path, input("t1", "list")).await;
    assert_eq!(status, 200);
    assert_eq!(types(&events), ["RUN_ERROR"]);
    assert_eq!(events[0]["code"], "conflict");

    // An invocation key of the app runs threads (with unguessable ids: every
    // end user holds that key) but cannot decide; one of another app does
    // not see the app.
    let (_, invocation) = server.mint_key("invocation", "web", Some("ops")).await;
    let (status, body) = run(&server, &invocation, path, input("t3", "list")).await;
    assert_eq!(
        (status, body[0]["error"]["code"].as_str()),
        (422, Some("guessable_name")),
        "a short threadId with a bare invocation key"
    );
    let resume = json!({
        "threadId": "t1", "runId": "r", "messages": [],
        "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": false}}]
    });
    let (status, body) = run(&server, &invocation, path, resume.clone()).await;
    assert_eq!(status, 403, "{body:?}");
    let t3 = "0b4c3d2e-1f5a-4b6c-8d7e-9f0a1b2c3d4e";
    let (status, _) = run(&server, &invocation, path, input(t3, "list")).await;
    assert_eq!(status, 200);
    server.deploy("hello", &support::guest("hello")).await;
    let (_, other) = server.mint_key("invocation", "other", Some("hello")).await;
    let (status, body) = run(&server, &other, path, input(t3, "list")).await;
    assert_eq!(
        (status, body[0]["error"]["code"].as_str()),
        (404, Some("app_not_found"))
    );

    // Bad resumes: an unknown interrupt, a payload without `approved`.
    let mut unknown = resume.clone();
    unknown["resume"][0]["interruptId"] = json!("not-an-interrupt");
    let (_, events) = run(&server, KEY, path, unknown).await;
    assert_eq!(events[0]["code"], "unknown_interrupt");
    let mut shapeless = resume.clone();
    shapeless["resume"][0]["payload"] = json!({"yes": true});
    let (status, _) = run(&server, KEY, path, shapeless).await;
    assert_eq!(status, 422);
    // Cancelled denies; answering again is a RUN_ERROR.
    let mut cancelled = resume.clone();
    cancelled["resume"][0] = json!({"interruptId": interrupt["id"], "status": "cancelled"});
    let (_, events) = run(&server, KEY, path, cancelled.clone()).await;
    assert_eq!(events[1]["type"], "TOOL_CALL_RESULT", "{events:?}");
    assert_eq!(events[1]["metadata"]["agenthost"]["status"], "denied");
    let (_, events) = run(&server, KEY, path, cancelled).await;
    assert_eq!(events[0]["code"], "conflict");

    // No user message, an over-long thread id, an unknown route.
    let mut silent = input("t1", "x");
    silent["messages"] = json!([{"id": "a", "role": "assistant", "content": "hi"}]);
    let (status, body) = run(&server, KEY, path, silent).await;
    assert_eq!(
        (status, body[0]["error"]["code"].as_str()),
        (422, Some("no_user_message"))
    );
    let (status, _) = run(&server, KEY, path, input(&"t".repeat(257), "list")).await;
    assert_eq!(status, 422);
    let (status, body) = run(&server, KEY, "/ag-ui/ops/nope", input("t9", "list")).await;
    assert_eq!(
        (status, body[0]["error"]["code"].as_str()),
        (404, Some("route_not_found"))
    );

    // The events endpoint: an unknown format, and a frame id that names no frame.
    let session = s1.as_str().unwrap();
    let (status, _) = server
        .get(&format!("/sessions/{session}/events?format=xml"))
        .await;
    assert_eq!(status, 400);
    let (status, _) = server
        .get(&format!(
            "/sessions/{session}/events?format=ag-ui&last_event_id={}:x",
            uuid::Uuid::now_v7()
        ))
        .await;
    assert_eq!(status, 400);
}
