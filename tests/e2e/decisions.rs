//! Richer decisions (`POST /sessions/{id}/approval` with `arguments`,
//! `message`, `result`), through real components of the three SDKs: edited
//! arguments run the tool with them, a denial carries its message to the
//! agent, a given result answers in place of the tool; an invalid edit is
//! 422 and decides nothing. The Rust one also through the approvals feed and
//! the AG-UI resume; the Python one on both engines (`Server` follows
//! `AGENTHOST_TEST_STORE`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::agents::{self, TERMINAL};
use crate::support::{self, EventStream, Server, bundle};

/// What an agent says after each decision of `scenario`.
struct Says {
    /// `delete <original>` approved with `{"name": <edited>}`.
    edited: &'static str,
    /// `delete <denied>` denied by alice with the message `not on Fridays`.
    denied: &'static str,
    /// `delete <answered>` answered with the result `{"deleted": <answered>}`.
    answered: &'static str,
}

fn said(events: &[Value]) -> String {
    agents::said(events).last().cloned().unwrap_or_default()
}

fn one<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found = agents::of_type(events, kind);
    assert_eq!(found.len(), 1, "one {kind} in {events:#?}");
    found[0]
}

async fn input(server: &Server, stream: &mut EventStream, session: &str, text: &str) {
    agents::input(server, session, text).await;
    let events = stream.until(TERMINAL).await;
    assert_eq!(
        agents::last(&events)["type"],
        "TOOL_APPROVAL_REQUIRED",
        "{events:#?}"
    );
}

async fn decide(server: &Server, session: &str, body: Value) -> (u16, Value) {
    server
        .post(&format!("/sessions/{session}/approval"), body)
        .await
}

/// On the app `slug` (route `/ops`, gated `delete_record` taking
/// `{"name": string}`), a session whose first input is `first`: an invalid
/// edit is refused and decides nothing, then an edit, a denial with a
/// message and a given result, each checked in the journal and in what the
/// agent says.
async fn scenario(server: &Server, slug: &str, first: &str, names: [&str; 4], says: Says) {
    let [original, edited, denied, answered] = names;
    let session = server.session(slug, "/ops", json!(first)).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;

    // An edit that breaks the tool's schema: 422, nothing decided.
    input(server, &mut stream, &session, &format!("delete {original}")).await;
    let (status, body) = decide(
        server,
        &session,
        json!({"approved": true, "arguments": {"name": 5}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_arguments", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("/name"),
        "{body}"
    );
    let (status, body) = decide(
        server,
        &session,
        json!({"approved": false, "arguments": {"name": edited}}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("invalid_body"))
    );
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "awaiting_approval", "{record}");
    let (_, approvals) = server.get(&format!("/approvals?app={slug}")).await;
    assert_eq!(approvals["items"].as_array().unwrap().len(), 1);

    // Approved with edited arguments: the tool runs with them.
    let (status, body) = decide(
        server,
        &session,
        json!({"approved": true, "arguments": {"name": edited}, "message": "the other one"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let granted = &one(&events, "TOOL_APPROVAL_GRANTED")["payload"];
    assert_eq!(granted["arguments"], json!({"name": edited}));
    assert_eq!(granted["original_arguments"], json!({"name": original}));
    assert_eq!(granted["message"], "the other one");
    let result = &one(&events, "TOOL_RESULT")["payload"];
    assert_eq!(result["status"], "ok", "{events:#?}");
    assert_eq!(result["output"], json!({"deleted": edited}));
    assert_eq!(agents::last(&events)["type"], "TURN_ENDED");
    assert_eq!(said(&events), says.edited);

    // Denied with a message: the agent reads it, the output carries it.
    input(server, &mut stream, &session, &format!("delete {denied}")).await;
    let body = json!({"approved": false, "approver": "alice", "message": "not on Fridays"});
    let (status, answer) = decide(server, &session, body).await;
    assert_eq!(status, 202, "{answer}");
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let refused = &one(&events, "TOOL_APPROVAL_DENIED")["payload"];
    assert_eq!(refused["message"], "not on Fridays");
    let result = &one(&events, "TOOL_RESULT")["payload"];
    assert_eq!(result["status"], "denied");
    assert_eq!(result["output"], "denied by alice: not on Fridays");
    assert_eq!(agents::last(&events)["type"], "TURN_ENDED");
    assert_eq!(said(&events), says.denied);

    // A result given in place of the tool: the tool does not run.
    input(server, &mut stream, &session, &format!("delete {answered}")).await;
    let given = json!({"deleted": answered});
    let (status, body) = decide(server, &session, json!({"approved": true, "result": given})).await;
    assert_eq!(status, 202, "{body}");
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(
        one(&events, "TOOL_APPROVAL_GRANTED")["payload"]["result"],
        given
    );
    let result = &one(&events, "TOOL_RESULT")["payload"];
    assert_eq!(result["status"], "ok", "{events:#?}");
    assert_eq!(result["output"], given);
    assert_eq!(agents::last(&events)["type"], "TURN_ENDED", "{events:#?}");
    assert_eq!(said(&events), says.answered);
}

async fn deploy_ops(server: &Server) {
    deploy_ops_with(server, "").await;
}

/// Deploys `examples/ops` as `ops`, with `extra` manifest text.
async fn deploy_ops_with(server: &Server, extra: &str) {
    let manifest = format!("[app]\nslug = \"ops\"\n[agent]\nentry = \"ops.wasm\"\n{extra}");
    let component = support::guest("ops");
    let (status, row) = server
        .upload(bundle(&[("ops.wasm", &component)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
}

/// The Rust SDK (`examples/ops`): `delete_record` of a record that does not
/// exist fails, so the given result for `ghost` shows the tool never ran.
#[tokio::test]
async fn rust_edits_denials_with_a_message_and_given_results() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    let says = Says {
        edited: "Deleted pears. Records: apples.",
        denied: "The deletion of apples was denied by alice: not on Fridays. Records: apples.",
        answered: "Deleted ghost. Records: apples.",
    };
    let names = ["apples", "pears", "apples", "ghost"];
    scenario(&server, "ops", "add apples pears", names, says).await;
}

/// The decided entry of the approvals feed carries the decision's event,
/// message included; a message past its bound is refused.
#[tokio::test]
async fn the_feed_shows_the_message_and_long_messages_are_refused() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    let session = server.session("ops", "/ops", json!("add a")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &mut stream, &session, "delete a").await;
    let mut feed = server.approval_feed("", None).await;
    let wait = Duration::from_secs(60);
    assert_eq!(
        feed.frame(wait).await.unwrap().event.as_deref(),
        Some("APPROVALS_SNAPSHOT")
    );
    let long = "x".repeat(4097);
    let (status, body) = decide(
        &server,
        &session,
        json!({"approved": false, "message": long}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("invalid_body"))
    );
    let at_bound = "y".repeat(4096);
    let (status, body) = decide(
        &server,
        &session,
        json!({"approved": false, "message": at_bound}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let decided = feed.frame(wait).await.unwrap();
    assert_eq!(decided.event.as_deref(), Some("APPROVAL_DECIDED"));
    let event = &decided.json()["event"];
    assert_eq!(event["type"], "TOOL_APPROVAL_DENIED");
    assert_eq!(event["payload"]["message"], json!(at_bound));
}

/// A given result reaches the journal exactly as given (the host accepts
/// only that output as the call's `ok` result); `result` with `arguments`,
/// or with a denial, is refused.
#[tokio::test]
async fn a_given_result_is_reported_exactly_and_conflicting_fields_are_refused() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    let session = server.session("ops", "/ops", json!("add a")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &mut stream, &session, "delete a").await;
    let given = json!({"deleted": "a", "n": [1, 2.5, "3"], "nested": {"k": null}});
    let (status, body) = decide(
        &server,
        &session,
        json!({"approved": true, "result": given}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(one(&events, "TOOL_RESULT")["payload"]["output"], given);
    assert_eq!(agents::last(&events)["type"], "TURN_ENDED", "{events:#?}");
    // `result` and `arguments` together, or a result with a denial: 422.
    input(&server, &mut stream, &session, "delete a").await;
    for body in [
        json!({"approved": true, "result": 1, "arguments": {"name": "a"}}),
        json!({"approved": false, "result": 1}),
    ] {
        let (status, answer) = decide(&server, &session, body).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (422, &json!("invalid_body"))
        );
    }
}

/// The Python SDK (the `checks` agent), on both engines.
#[tokio::test]
async fn python_edits_denials_with_a_message_and_given_results() {
    let dir = support::data_dir();
    let server = agents::server(dir.path(), &[]).await;
    let component = crate::python::python_guest("tests/fixtures/python/checks");
    let manifest = agents::manifest("checks-py", "python", "");
    agents::deploy(&server, &component, &manifest).await;
    let says = Says {
        edited: "Deleted pears.",
        denied: "The delete_record call was denied by alice: not on Fridays.",
        answered: "Deleted plums.",
    };
    let names = ["apples", "pears", "kiwis", "plums"];
    scenario(&server, "checks-py", "add apples", names, says).await;
}

/// The TypeScript SDK (the `checks` agent).
#[tokio::test]
async fn typescript_edits_denials_with_a_message_and_given_results() {
    let dir = support::data_dir();
    let server = agents::server(dir.path(), &[]).await;
    let component = crate::typescript::typescript_guest("tests/fixtures/typescript/checks");
    let manifest = agents::manifest("checks-ts", "typescript", "");
    agents::deploy(&server, &component, &manifest).await;
    let says = Says {
        edited: "Deleted pears.",
        denied: "The delete_record call was denied by alice: not on Fridays.",
        answered: "Deleted plums.",
    };
    let names = ["apples", "pears", "kiwis", "plums"];
    scenario(&server, "checks-ts", "add apples", names, says).await;
}

/// The console (a real Chromium): a person edits the arguments in place and
/// approves, then denies the next call with a message; the agent says both.
#[tokio::test]
async fn the_console_edits_arguments_in_place_and_denies_with_a_message() {
    use crate::support::browser::Browser;
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    let session = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    let enter = char::from(fantoccini::key::Key::Enter);
    browser
        .fill(
            ".signin input[type=password]",
            &format!("{}{enter}", support::KEY),
        )
        .await;
    browser.go(&format!("#/sessions/{session}")).await;
    let says = |text: &str| {
        format!(
            "[...document.querySelectorAll('.msg[data-role=assistant]:not(.streaming) .text')]
                .some((m) => m.textContent === {})",
            json!(text)
        )
    };
    let waiting =
        "document.querySelector('.session-status')?.dataset.status === 'awaiting_approval'";
    let send = |text: &'static str| {
        let browser = &browser;
        async move {
            browser
                .until(
                    "the Send button to be enabled",
                    "document.querySelector('.composer button')?.disabled === false",
                )
                .await;
            browser
                .fill(".composer textarea", &format!("{text}{enter}"))
                .await;
        }
    };
    browser
        .until(
            "the first turn",
            &says("Added apples. Added pears. Records: apples, pears."),
        )
        .await;

    send("delete apples").await;
    browser.until("the call to wait", waiting).await;
    browser
        .click(".decision-dock .edit-arguments summary")
        .await;
    let shown = browser
        .js("JSON.parse(document.querySelector('.decision-dock textarea[name=arguments]').value)")
        .await;
    assert_eq!(
        shown,
        json!({"name": "apples"}),
        "the agent's arguments, to edit"
    );
    browser
        .fill(".decision-dock textarea[name=arguments]", r#"{"name": 7}"#)
        .await;
    browser.click_labelled(".decision-dock", "Approve").await;
    browser
        .until(
            "the schema's refusal in the form",
            "document.querySelector('.decision-dock .form-error')?.textContent.includes('name')",
        )
        .await;
    browser
        .fill(
            ".decision-dock textarea[name=arguments]",
            r#"{"name": "pears"}"#,
        )
        .await;
    browser.click_labelled(".decision-dock", "Approve").await;
    browser
        .until(
            "the edited call's result",
            &says("Deleted pears. Records: apples."),
        )
        .await;

    send("delete apples").await;
    browser.until("the call to wait", waiting).await;
    browser
        .fill(".decision-dock input[name=message]", "keep it for now")
        .await;
    browser.click_labelled(".decision-dock", "Deny").await;
    browser
        .until(
            "the denial with its message",
            &says(
                "The deletion of apples was denied by bootstrap: keep it for now. Records: apples.",
            ),
        )
        .await;
    // The reply shows before its TURN_ENDED commits: the session goes idle
    // right after it.
    let mut status = Value::Null;
    for _ in 0..600 {
        status = server.get(&format!("/sessions/{session}")).await.1["status"].clone();
        if status == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, "idle");
    // The transcript says how each call was decided.
    let approved = browser
        .text(".tool[data-tool=delete_record][data-decision=approved]")
        .await;
    assert!(
        approved.contains("Approved by bootstrap with edited arguments"),
        "{approved}"
    );
    assert!(approved.contains(r#"{"name":"pears"}"#), "{approved}");
    let denied = browser
        .text(".tool[data-tool=delete_record][data-decision=denied]")
        .await;
    assert!(
        denied.contains("Denied by bootstrap: “keep it for now”"),
        "{denied}"
    );
    // The one thing logged: the refused edit's 422.
    for error in browser.errors().await {
        assert!(error.to_string().contains("422"), "{error}");
    }
}

/// POSTs a RunAgentInput to `/ag-ui/ops/ops`; the status and the events.
async fn ag_ui(server: &Server, body: Value) -> (u16, Vec<Value>) {
    let response = server
        .client
        .post(server.url("/ag-ui/ops/ops"))
        .bearer_auth(support::KEY)
        .json(&body)
        .send()
        .await
        .expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    if status != 200 {
        return (status, vec![serde_json::from_str(&text).expect("JSON")]);
    }
    let events = (text.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("JSON event"))
        .collect();
    (status, events)
}

/// An AG-UI `resume` carries edited arguments and a message: a schema
/// mismatch is refused (422, nothing decided), the edit runs the tool.
#[tokio::test]
async fn an_ag_ui_resume_carries_edited_arguments_and_a_message() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    let input = |text: &str| {
        json!({"threadId": "t1", "runId": text, "tools": [], "context": [],
               "messages": [{"id": "m1", "role": "user", "content": text}]})
    };
    let (status, _) = ag_ui(&server, input("add apples pears")).await;
    assert_eq!(status, 200);
    let (_, events) = ag_ui(&server, input("delete apples")).await;
    let interrupt = &events.last().unwrap()["outcome"]["interrupts"][0];
    let properties = &interrupt["responseSchema"]["properties"];
    for field in ["arguments", "message", "result"] {
        assert!(properties.get(field).is_some(), "{properties}");
    }
    let resume = |payload: Value| {
        json!({"threadId": "t1", "runId": "r", "messages": [],
               "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]})
    };
    let (status, body) = ag_ui(
        &server,
        resume(json!({"approved": true, "arguments": {"name": []}})),
    )
    .await;
    assert_eq!(status, 422, "{body:?}");
    assert_eq!(body[0]["error"]["code"], "invalid_arguments");
    let (_, approvals) = server.get("/approvals").await;
    assert_eq!(approvals["items"].as_array().unwrap().len(), 1, "undecided");
    let (status, events) = ag_ui(
        &server,
        resume(json!({"approved": true, "approver": "alice",
                      "arguments": {"name": "pears"}, "message": "pears, not apples"})),
    )
    .await;
    assert_eq!(status, 200);
    let result = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .expect("the call's result");
    assert_eq!(result["content"], json!({"deleted": "pears"}).to_string());
    let session = events[0]["metadata"]["agenthost"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = server.events(&session, None).await;
    let journal = stream.until(&["TOOL_APPROVAL_GRANTED"]).await;
    let granted = &agents::last(&journal)["payload"];
    assert_eq!(granted["arguments"], json!({"name": "pears"}));
    assert_eq!(granted["original_arguments"], json!({"name": "apples"}));
    assert_eq!(granted["message"], "pears, not apples");
    assert_eq!(granted["approver"], "alice");
}

/// An end user who may decide their own calls (`approver = "end_user"`)
/// approves or denies what the agent proposed, with a message: rewriting
/// the call or answering for the tool is an operator's (403).
#[tokio::test]
async fn an_end_user_may_add_a_message_but_not_edit_the_call_or_answer_for_it() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops_with(&server, "[tools.delete_record]\napprover = \"end_user\"\n").await;
    let ada = server.end_user_token("ops", "ada").await;
    let as_ada = |path: String, body: Value| {
        let request = server.client.post(server.url(&path)).bearer_auth(&ada);
        async move { support::status_and_json(request.json(&body).send().await.unwrap()).await }
    };
    let body = json!({"app": "ops", "route": "/ops", "input": "add apples"});
    let (status, created) = as_ada("/sessions".into(), body).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    let (status, _) = as_ada(
        format!("/sessions/{session}/input"),
        json!({"input": "delete apples"}),
    )
    .await;
    assert_eq!(status, 202);
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    let path = format!("/sessions/{session}/approval");
    for body in [
        json!({"approved": true, "arguments": {"name": "pears"}}),
        json!({"approved": true, "result": {"deleted": "apples"}}),
    ] {
        let (status, answer) = as_ada(path.clone(), body).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (403, &json!("forbidden")),
            "{answer}"
        );
    }
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "awaiting_approval", "nothing decided");
    let body = json!({"approved": false, "message": "I changed my mind"});
    let (status, answer) = as_ada(path, body).await;
    assert_eq!(status, 202, "{answer}");
    let events = stream.until(&["TURN_ENDED"]).await;
    let denied = &one(&events, "TOOL_APPROVAL_DENIED")["payload"];
    assert_eq!(denied["message"], "I changed my mind");
    assert_eq!(
        said(&events),
        "The deletion of apples was denied by ada: I changed my mind. Records: apples."
    );
}

/// An edit retried with its `Idempotency-Key` gets its first answer again
/// (the call is no longer pending, so there is nothing to check it against:
/// the writer answers), and nothing more is journaled.
#[tokio::test]
async fn an_edit_retried_with_its_idempotency_key_gets_its_first_answer() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server).await;
    let session = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &mut stream, &session, "delete apples").await;
    let body = json!({"approved": true, "arguments": {"name": "pears"}});
    let post = || {
        let request = server
            .client
            .post(server.url(&format!("/sessions/{session}/approval")))
            .bearer_auth(support::KEY)
            .header("Idempotency-Key", "edit-1")
            .json(&body);
        async move { support::status_and_json(request.send().await.unwrap()).await }
    };
    let (status, first) = post().await;
    assert_eq!(status, 202, "{first}");
    let events = stream.until(&["TURN_ENDED"]).await;
    assert_eq!(said(&events), "Deleted pears. Records: apples.");
    let (status, again) = post().await;
    assert_eq!((status, &again), (202, &first));
    let (status, plain) = decide(&server, &session, body.clone()).await;
    assert_eq!(status, 409, "without the key: {plain}");
}

/// A component that reports its own output for a call a human answered (the
/// raw-WIT `rogue` forges `"forged"`) is refused: the call's only `ok`
/// result is the one given, and the turn fails with `invalid_order`.
#[tokio::test]
async fn the_host_refuses_any_other_output_for_a_given_result() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let session = server.session("rogue", "/forge", json!("go")).await;
    let mut stream = server.events(&session, None).await;
    let suspended = stream.until(TERMINAL).await;
    assert_eq!(agents::last(&suspended)["type"], "TOOL_APPROVAL_REQUIRED");
    let (status, body) = decide(
        &server,
        &session,
        json!({"approved": true, "result": {"answered": "by hand"}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let resumed = stream.until(&["TURN_ERROR", "TURN_ENDED"]).await;
    assert!(
        agents::of_type(&resumed, "TOOL_RESULT").is_empty(),
        "{resumed:#?}"
    );
    let last = &agents::last(&resumed)["payload"];
    assert_eq!(last["kind"], "invalid_order", "{last}");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("a human gave the result"),
        "{last}"
    );
}
