//! Gated tool calls: suspend, a human decides exactly once, a fresh runner resumes.

use serde_json::{Value, json};

use crate::support::{self, Server, bundle, types};

/// Deploys the ops example as `slug`, with extra manifest text and a policy.
async fn deploy_ops(server: &Server, slug: &str, extra: &str, policy: Option<&str>) -> Value {
    let manifest = format!("[app]\nslug = \"{slug}\"\n[agent]\nentry = \"ops.wasm\"\n{extra}");
    let component = support::guest("ops");
    let (status, row) = server
        .upload_with_policy(bundle(&[("ops.wasm", &component)]), &manifest, policy)
        .await;
    assert_eq!(status, 202, "{row}");
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "active", "{row}");
    row
}

async fn ops_server() -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server, "ops", "", None).await;
    (dir, server)
}

fn last_message(events: &[Value]) -> String {
    events
        .iter()
        .rfind(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .map(|e| e["payload"]["text"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

async fn input(server: &Server, session: &str, text: &str) -> (u16, Value) {
    server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": text}),
        )
        .await
}

async fn decide(server: &Server, session: &str, body: Value) -> (u16, Value) {
    server
        .post(&format!("/sessions/{session}/approval"), body)
        .await
}

#[tokio::test]
async fn each_mechanism_gates_alone_and_gated_by_says_which() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server, "by-code", "", None).await;
    let manifest_extra = "[tools.archive_record]\nneeds_approval = true\n";
    deploy_ops(&server, "by-manifest", manifest_extra, None).await;
    let row = deploy_ops(&server, "by-policy", "", Some(r#"["add_record"]"#)).await;
    assert_eq!(row["approval_policy"], json!(["add_record"]));

    for (app, command, tool, gated_by) in [
        ("by-code", "delete x", "delete_record", json!(["code"])),
        (
            "by-manifest",
            "archive x",
            "archive_record",
            json!(["manifest"]),
        ),
        ("by-policy", "add x", "add_record", json!(["policy"])),
    ] {
        let session = server.session(app, "/ops", json!(command)).await;
        let events = server
            .events(&session, None)
            .await
            .until(&["TOOL_APPROVAL_REQUIRED", "TURN_ENDED", "TURN_ERROR"])
            .await;
        let last = events.last().unwrap();
        assert_eq!(last["type"], "TOOL_APPROVAL_REQUIRED", "{app}: {events:?}");
        assert_eq!(last["payload"]["name"], tool);
        assert_eq!(last["payload"]["gated_by"], gated_by, "{app}");
        assert_eq!(last["payload"]["arguments"], json!({"name": "x"}));
        assert!(
            last["payload"]["reason"]
                .as_str()
                .unwrap()
                .contains("the user asked to")
        );
    }
    // None applies: the call runs at once.
    for (app, command) in [
        ("by-code", "add y"),
        ("by-code", "archive y"),
        ("by-manifest", "add y"),
    ] {
        let session = server.session(app, "/ops", json!(command)).await;
        let events = server
            .events(&session, None)
            .await
            .until(&["TOOL_APPROVAL_REQUIRED", "TURN_ENDED", "TURN_ERROR"])
            .await;
        assert_eq!(
            events.last().unwrap()["type"],
            "TURN_ENDED",
            "{app} {command}: {events:?}"
        );
        let result = events.iter().find(|e| e["type"] == "TOOL_RESULT").unwrap();
        assert_eq!(result["payload"]["status"], "ok");
    }
}

#[tokio::test]
async fn approve_round_trip_runs_the_tool_exactly_once() {
    let (_dir, server) = ops_server().await;
    let session = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    // One client stays connected across the whole suspension.
    let mut watcher = server.events(&session, None).await;
    let first = watcher.until(&["TURN_ENDED"]).await;
    assert_eq!(input(&server, &session, "delete apples").await.0, 202);
    let suspended = watcher
        .until(&["TOOL_APPROVAL_REQUIRED", "TURN_ENDED", "TURN_ERROR"])
        .await;
    let required = suspended.last().unwrap().clone();
    assert_eq!(required["type"], "TOOL_APPROVAL_REQUIRED", "{suspended:?}");
    let call_id = required["payload"]["tool_call_id"]
        .as_str()
        .unwrap()
        .to_string();

    // It is the turn's last event: nothing follows until a decision.
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "awaiting_approval");
    assert_eq!(record["pending_approval"]["tool_call_id"], call_id.as_str());
    let (status, body) = input(&server, &session, "add more").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("decide it first")
    );
    let (status, approvals) = server.get("/approvals").await;
    assert_eq!(status, 200);
    let item = &approvals["items"][0];
    assert_eq!(item["session"]["session_id"], session.as_str());
    assert_eq!(item["session"]["status"], "awaiting_approval");
    assert_eq!(item["session"]["app"], "ops");
    assert_eq!(item["session"]["route"], "/ops");
    assert_eq!(item["event"], required);

    let (status, body) = decide(&server, &session, json!({"approved": true})).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["tool_call_id"], call_id.as_str());
    let resumed = watcher.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(
        types(&resumed),
        [
            "TOOL_APPROVAL_GRANTED",
            "TURN_STARTED",
            "TOOL_RESULT",
            "MESSAGE_START",
            "MESSAGE_DELTA",
            "MESSAGE_END",
            "TURN_ENDED",
        ]
    );
    // The default approver is the deciding key's principal.
    assert_eq!(resumed[0]["payload"]["approver"], "bootstrap");
    assert_eq!(resumed[0]["payload"]["key_id"], "bootstrap");
    assert_eq!(resumed[1]["payload"]["reason"]["kind"], "approval_decision");
    assert_eq!(resumed[1]["payload"]["reason"]["approved"], true);
    assert_eq!(resumed[2]["payload"]["tool_call_id"], call_id.as_str());
    assert_eq!(resumed[2]["payload"]["status"], "ok");
    assert_eq!(last_message(&resumed), "Deleted apples. Records: pears.");

    // Decided exactly once.
    let (status, _) = decide(&server, &session, json!({"approved": true})).await;
    assert_eq!(status, 409);
    let (_, approvals) = server.get("/approvals").await;
    assert_eq!(approvals["items"], json!([]));

    // The whole journal, read fresh: every seq once, and the tool ran once.
    let last_seq = resumed.last().unwrap()["seq"].as_u64().unwrap();
    let all = server
        .events(&session, None)
        .await
        .until_seq(last_seq)
        .await;
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], i as u64);
    }
    // The client connected across the suspension saw exactly that, once each.
    let watched: Vec<Value> = [first, suspended.clone(), resumed.clone()].concat();
    assert_eq!(watched, all);
    let results = all
        .iter()
        .filter(|e| e["type"] == "TOOL_RESULT" && e["payload"]["tool_call_id"] == call_id.as_str())
        .count();
    assert_eq!(results, 1, "the approved tool ran exactly once");

    // A client resuming from the suspension point gets exactly the rest.
    let mut resumer = server
        .events(&session, Some(required["id"].as_str().unwrap()))
        .await;
    let rest = resumer.until(&["TURN_ENDED"]).await;
    assert_eq!(rest, resumed);
}

#[tokio::test]
async fn deny_round_trip_tells_the_agent_and_continues() {
    let (_dir, server) = ops_server().await;
    let session = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &session, "delete pears").await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    let (status, body) = decide(
        &server,
        &session,
        json!({"approved": false, "approver": "alice"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let resumed = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(resumed[0]["type"], "TOOL_APPROVAL_DENIED");
    assert_eq!(resumed[0]["payload"]["approver"], "alice");
    let result = resumed.iter().find(|e| e["type"] == "TOOL_RESULT").unwrap();
    assert_eq!(result["payload"]["status"], "denied");
    assert_eq!(resumed.last().unwrap()["type"], "TURN_ENDED");
    assert_eq!(
        last_message(&resumed),
        "The deletion of pears was denied by alice. Records: apples, pears."
    );
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "idle");
}

#[tokio::test]
async fn decisions_race_once_and_bad_requests_are_refused() {
    let (_dir, server) = ops_server().await;
    let session = server.session("ops", "/ops", json!("add a")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    // Nothing pending yet.
    assert_eq!(
        decide(&server, &session, json!({"approved": true})).await.0,
        409
    );
    input(&server, &session, "delete a").await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    for bad in [
        json!({}),
        json!({"approved": "yes"}),
        json!({"approved": true, "extra": 1}),
    ] {
        let (status, body) = decide(&server, &session, bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {body}");
    }
    let missing = uuid::Uuid::now_v7();
    let (status, body) = decide(&server, &missing.to_string(), json!({"approved": true})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("session_not_found"))
    );

    let (a, b) = tokio::join!(
        decide(
            &server,
            &session,
            json!({"approved": true, "approver": "a"})
        ),
        decide(
            &server,
            &session,
            json!({"approved": false, "approver": "b"})
        ),
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [202, 409], "{a:?} {b:?}");
    let resumed = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let decisions = resumed
        .iter()
        .filter(|e| e["type"] == "TOOL_APPROVAL_GRANTED" || e["type"] == "TOOL_APPROVAL_DENIED")
        .count();
    assert_eq!(decisions, 1);
}

#[tokio::test]
async fn two_gated_calls_in_one_step_fail_loudly() {
    let (_dir, server) = ops_server().await;
    let session = server.session("ops", "/ops", json!("add a b")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &session, "delete a b").await;
    let events = stream
        .until(&["TURN_ENDED", "TURN_ERROR", "TOOL_APPROVAL_REQUIRED"])
        .await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "TURN_ERROR", "{events:?}");
    assert_eq!(last["payload"]["kind"], "multiple_gated_calls");
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL")
        .map(|e| e["payload"]["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    for id in ids {
        assert!(
            last["payload"]["message"].as_str().unwrap().contains(id),
            "{last}"
        );
    }
    let (status, _) = input(&server, &session, "list").await;
    assert_eq!(status, 202, "the session accepts new input");
    let events = stream.until(&["TURN_ENDED"]).await;
    assert_eq!(last_message(&events), "Records: a, b.");
}

#[tokio::test]
async fn ungated_calls_of_a_suspended_step_run_on_resume() {
    let (_dir, server) = ops_server().await;
    let session = server.session("ops", "/ops", json!("add apples")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &session, "mixed kiwis apples").await;
    let suspended = stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    assert_eq!(
        suspended
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL")
            .count(),
        2,
        "both calls are journaled"
    );
    assert!(
        !suspended
            .iter()
            .any(|e| e["type"] == "TOOL_RESULT" && e["seq"].as_u64() > Some(5))
    );
    decide(&server, &session, json!({"approved": true})).await;
    let resumed = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let results: Vec<&str> = resumed
        .iter()
        .filter(|e| e["type"] == "TOOL_RESULT")
        .map(|e| e["payload"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["add_record", "delete_record"]);
    assert_eq!(
        last_message(&resumed),
        "Added kiwis. Deleted apples. Records: kiwis."
    );
}

#[tokio::test]
async fn a_pending_approval_survives_a_restart() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(&server, "ops", "", None).await;
    let session = server.session("ops", "/ops", json!("add a")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &session, "delete a").await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    drop(stream);
    server.kill();
    let server = Server::start(dir.path()).await;
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "awaiting_approval");
    let (_, approvals) = server.get("/approvals?app=ops").await;
    assert_eq!(approvals["items"].as_array().unwrap().len(), 1);
    let (status, _) = decide(&server, &session, json!({"approved": true})).await;
    assert_eq!(status, 202);
    // Turn 3 (the resumed one) runs on the restarted server.
    let mut stream = server.events(&session, None).await;
    loop {
        let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
        let last = events.last().unwrap();
        if last["payload"]["turn"] == 3 {
            assert_eq!(last["type"], "TURN_ENDED", "{events:?}");
            assert_eq!(last_message(&events), "Deleted a. Records: none.");
            break;
        }
    }
}

#[tokio::test]
async fn the_host_refuses_results_without_a_grant() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    let rogue_results =
        |events: &[Value]| events.iter().filter(|e| e["type"] == "TOOL_RESULT").count();

    // While suspended, a forged result and a new message are both refused
    // (the rogue checks that itself and would fail the turn otherwise).
    let denied = server.session("rogue", "/forge", json!("go")).await;
    let mut stream = server.events(&denied, None).await;
    let suspended = stream
        .until(&["TOOL_APPROVAL_REQUIRED", "TURN_ERROR", "TURN_ENDED"])
        .await;
    assert_eq!(
        suspended.last().unwrap()["type"],
        "TOOL_APPROVAL_REQUIRED",
        "{suspended:?}"
    );
    // TOOL_APPROVAL_REQUIRED is journaled once the guest has returned, so
    // whatever the suspended guest got written comes before it: these fail
    // if the gate lets a suspended turn write (checked by breaking it).
    assert_eq!(rogue_results(&suspended), 0, "{suspended:#?}");
    assert!(
        !(suspended.iter()).any(|e| e["payload"]["role"] == "assistant"),
        "a suspended turn wrote a message: {suspended:#?}"
    );

    // Denied, the rogue forges an `ok` result: refused, the turn fails.
    decide(&server, &denied, json!({"approved": false})).await;
    let resumed = stream.until(&["TURN_ERROR", "TURN_ENDED"]).await;
    let last = resumed.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["payload"]["kind"].as_str()),
        (Some("TURN_ERROR"), Some("invalid_order"))
    );
    assert!(
        last["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("was denied"),
        "{last}"
    );
    assert_eq!(rogue_results(&resumed), 0);

    // Approved, the first result is accepted and a second one refused.
    let approved = server.session("rogue", "/forge", json!("go")).await;
    let mut stream = server.events(&approved, None).await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    decide(&server, &approved, json!({"approved": true})).await;
    let resumed = stream.until(&["TURN_ERROR", "TURN_ENDED"]).await;
    assert_eq!(rogue_results(&resumed), 1, "{resumed:?}");
    let last = resumed.last().unwrap();
    assert_eq!(last["payload"]["kind"], "invalid_order");
    assert!(
        last["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("not waiting"),
        "{last}"
    );
}

#[tokio::test]
async fn an_approval_past_its_timeout_is_denied_by_timeout_and_the_turn_resumes() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    // The session record shows the event's deadline: checked on an app
    // whose deadline is an hour away, so that no window of a slow machine
    // decides whether it is still pending when read.
    deploy_ops(
        &server,
        "ops-later",
        "[limits]\napproval_timeout_secs = 3600\n",
        None,
    )
    .await;
    let later = server
        .session("ops-later", "/ops", json!("delete pears"))
        .await;
    let suspended = (server.events(&later, None).await)
        .until(&["TOOL_APPROVAL_REQUIRED"])
        .await;
    let deadline = &suspended.last().unwrap()["payload"]["expires_at"];
    assert!(deadline.is_string(), "a deadline: {suspended:?}");
    let (_, record) = server.get(&format!("/sessions/{later}")).await;
    assert_eq!(record["pending_approval"]["expires_at"], *deadline);

    deploy_ops(
        &server,
        "ops",
        "[limits]\napproval_timeout_secs = 1\n",
        None,
    )
    .await;
    let session = server.session("ops", "/ops", json!("add pears")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &session, "delete pears").await;
    let suspended = stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    let required = &suspended.last().unwrap()["payload"];
    let expires_at = required["expires_at"]
        .as_str()
        .expect("a deadline")
        .to_string();
    // Nobody decides: the deadline does, like a human denying.
    let resumed = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(resumed[0]["type"], "TOOL_APPROVAL_DENIED", "{resumed:?}");
    assert_eq!(resumed[0]["payload"]["approver"], "timeout");
    assert!(
        resumed[0]["created_at"].as_str().unwrap() >= expires_at.as_str(),
        "not before the deadline: {resumed:?}"
    );
    assert_eq!(resumed[1]["payload"]["reason"]["approved"], false);
    let result = resumed.iter().find(|e| e["type"] == "TOOL_RESULT").unwrap();
    assert_eq!(result["payload"]["status"], "denied");
    assert_eq!(resumed.last().unwrap()["type"], "TURN_ENDED", "{resumed:?}");
    // Decided once: a late human gets 409.
    let (status, body) = decide(&server, &session, json!({"approved": true})).await;
    assert_eq!(status, 409, "{body}");
}

#[tokio::test]
async fn an_approval_deadline_holds_across_a_restart() {
    let dir = support::data_dir();
    // The operator's default, for a manifest that sets none.
    let flags = ["--approval-timeout", "3s"];
    let server = Server::start_with(dir.path(), &flags).await;
    deploy_ops(&server, "ops", "", None).await;
    let session = server.session("ops", "/ops", json!("add a")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    input(&server, &session, "delete a").await;
    let suspended = stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    assert!(suspended.last().unwrap()["payload"]["expires_at"].is_string());
    drop(stream);
    server.kill();
    // The deadline passes while no server runs.
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let restarted_at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let server = Server::start_with(dir.path(), &flags).await;
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["TOOL_APPROVAL_DENIED"]).await;
    let denied = events.last().unwrap();
    assert_eq!(denied["payload"]["approver"], "timeout");
    // Denied by the restarted server: a deadline that passed before the
    // kill would prove nothing about the restart.
    assert!(
        denied["created_at"].as_str().unwrap() >= restarted_at.as_str(),
        "denied before the restart ({restarted_at}): {denied}"
    );
    let resumed = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(resumed.last().unwrap()["type"], "TURN_ENDED", "{resumed:?}");
    assert_eq!(
        last_message(&resumed),
        "The deletion of a was denied by timeout. Records: a."
    );
}

#[tokio::test]
async fn pending_approvals_are_listed_oldest_request_first_in_stable_pages() {
    let (_dir, server) = ops_server().await;
    // Sessions a, b, c are created in that order...
    let mut sessions = Vec::new();
    for name in ["a", "b", "c"] {
        let session = server
            .session("ops", "/ops", json!(format!("add {name}")))
            .await;
        let mut stream = server.events(&session, None).await;
        stream.until(&["TURN_ENDED"]).await;
        sessions.push((session, name, stream));
    }
    // ...and ask for approval in the order c, a, b.
    for index in [2, 0, 1] {
        let (session, name, stream) = &mut sessions[index];
        input(&server, session, &format!("delete {name}")).await;
        stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    }
    let expected: Vec<&str> = [2, 0, 1].iter().map(|&i| sessions[i].0.as_str()).collect();
    let (status, page) = server.get("/approvals").await;
    assert_eq!(status, 200, "{page}");
    let listed: Vec<&str> = (page["items"].as_array().unwrap().iter())
        .map(|item| item["session"]["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, expected, "{page}");
    // One per page, following the cursors: the same order, nothing twice.
    let mut paged = Vec::new();
    let mut path = "/approvals?limit=1".to_string();
    loop {
        let (status, page) = server.get(&path).await;
        assert_eq!(status, 200, "{page}");
        for item in page["items"].as_array().unwrap() {
            paged.push(item["session"]["session_id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/approvals?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(paged, expected);
}
