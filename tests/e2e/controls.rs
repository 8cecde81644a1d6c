//! Operator controls: cancel a running turn (mid-stream, mid-request, racing
//! its end), end and delete sessions, the retention purge, and the turn
//! supervisor (a panic in host code ends the turn with `internal`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::agents::of_type;
use crate::support::{self, Server, bundle, types};

async fn server_with(fixture: &str) -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let row = server.deploy(fixture, &support::guest(fixture)).await;
    assert_eq!(row["status"], "active", "{row}");
    (dir, server)
}

/// Reads events up to and including the first of `kind`.
async fn until(stream: &mut support::EventStream, kind: &str) -> Vec<Value> {
    stream.until(&[kind]).await
}

/// The events of the session's journal, read from the start until `last` kind.
async fn journal(server: &Server, session: &str, last: &[&str]) -> Vec<Value> {
    server.events(session, None).await.until(last).await
}

fn endings(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e["type"].as_str(), Some("TURN_ENDED" | "TURN_ERROR")))
        .count()
}

#[tokio::test]
async fn cancel_stops_a_long_stream_and_the_session_takes_input_again() {
    let (_dir, server) = server_with("slow").await;
    let (_, invoke) = server.mint_key("invocation", "web", Some("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    let path = format!("/sessions/{session}/cancel");
    let mut stream = server.events(&session, None).await;
    // The agent has opened its message and sleeps in the middle of it.
    until(&mut stream, "MESSAGE_DELTA").await;
    // The app's own invocation key may cancel.
    let (status, view) = server.post_as(&invoke, &path, json!({})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "errored", "{view}");
    let rest = until(&mut stream, "TURN_ERROR").await;
    assert_eq!(types(&rest), ["MESSAGE_END", "TURN_ERROR"], "{rest:#?}");
    assert_eq!(rest[0]["payload"]["incomplete"], true);
    let error = &rest[1]["payload"];
    assert_eq!(error["kind"], "cancelled", "{error}");
    assert_eq!(
        error["message"], "the turn was cancelled by the app",
        "names who cancelled by role, not by key: {error}"
    );
    // Nothing more of that turn; a second cancel finds nothing running.
    let (status, body) = server.post(&path, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "conflict");
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": {"sleep_ms": 1}}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let next = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(
        next[0]["type"], "TURN_STARTED",
        "nothing after the TURN_ERROR: {next:#?}"
    );
    assert_eq!(next.last().unwrap()["type"], "TURN_ENDED", "{next:#?}");
}

#[tokio::test]
async fn cancel_is_refused_to_other_apps_keys_and_without_a_running_turn() {
    let (_dir, server) = server_with("slow").await;
    server.deploy("hello", &support::guest("hello")).await;
    let (_, other) = server.mint_key("invocation", "other", Some("hello")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 1}))
        .await;
    let path = format!("/sessions/{session}/cancel");
    let (status, body) = server.post_as(&other, &path, json!({})).await;
    assert_eq!(
        status, 404,
        "another app's key never learns the session exists: {body}"
    );
    journal(&server, &session, &["TURN_ENDED"]).await;
    let (status, body) = server.post(&path, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("idle"),
        "{body}"
    );
    let (status, body) = server
        .post(
            "/sessions/00000000-0000-7000-8000-000000000000/cancel",
            json!({}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
}

/// A local upstream whose every request hangs.
async fn hanging_upstream() -> String {
    let app = axum::Router::new().fallback(std::future::pending::<&'static str>);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    origin
}

#[tokio::test]
async fn cancel_stops_a_turn_waiting_on_a_hung_request() {
    let origin = hanging_upstream().await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    let manifest = format!(
        "[app]\nslug = \"fetch\"\n[agent]\nentry = \"agent.wasm\"\n[outbound]\nallow = [\"{origin}\"]\n"
    );
    let component = support::guest("fetch");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &component)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
    let input = json!({"url": format!("{origin}/hang")});
    let session = server.session("fetch", "/fetch", input).await;
    let mut stream = server.events(&session, None).await;
    until(&mut stream, "HTTP_REQUEST").await;
    let (status, view) = server
        .post(&format!("/sessions/{session}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{view}");
    let rest = until(&mut stream, "TURN_ERROR").await;
    // The request in flight is on record as ended with the turn.
    assert_eq!(types(&rest), ["HTTP_RESPONSE", "TURN_ERROR"], "{rest:#?}");
    assert_eq!(rest[1]["payload"]["kind"], "cancelled");
    let input = json!({"input": {"url": format!("{origin}/hang")}});
    let (status, body) = server
        .post(&format!("/sessions/{session}/input"), input)
        .await;
    assert_eq!(status, 202, "the session takes input again: {body}");
}

#[tokio::test]
async fn a_cancel_racing_the_turns_end_leaves_exactly_one_ending() {
    let (_dir, server) = server_with("slow").await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 0}))
        .await;
    journal(&server, &session, &["TURN_ENDED"]).await;
    let cancel = format!("/sessions/{session}/cancel");
    let input = format!("/sessions/{session}/input");
    // (turn, the cancel's status, the session's status it answered). Turns
    // go on (at least 12, at most 80) until cancels have landed on both
    // sides of a turn's end: one that cancelled (200, `errored`) and one
    // that came after the end (409, or 200 showing the turn's own ending),
    // so the race did happen.
    let mut answers: Vec<(u64, u16, String)> = Vec::new();
    let cancelled = |a: &(u64, u16, String)| a.1 == 200 && a.2 == "errored";
    let mut turn = 1u64;
    let both_ways = |answers: &[(u64, u16, String)]| {
        answers.iter().any(cancelled) && !answers.iter().all(cancelled)
    };
    while turn < 13 || !both_ways(&answers) {
        turn += 1;
        assert!(
            turn <= 80,
            "the cancels never raced the end both ways: {answers:?}"
        );
        let sleep_ms = (turn % 4) * 3;
        let (status, body) = server
            .post(&input, json!({"input": {"sleep_ms": sleep_ms}}))
            .await;
        assert_eq!(status, 202, "{body}");
        if !turn.is_multiple_of(3) {
            tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
        }
        let (status, body) = server.post(&cancel, json!({})).await;
        assert!(status == 200 || status == 409, "{status} {body}");
        answers.push((turn, status, body["status"].as_str().unwrap_or("").into()));
        let (_, view) = server.get(&format!("/sessions/{session}")).await;
        assert_ne!(
            view["status"], "running",
            "the cancel answered after the end: {view}"
        );
    }
    // Read the whole journal: every turn with exactly one ending, the one
    // its cancel's answer says.
    let mut stream = server.events(&session, None).await;
    let mut all = Vec::new();
    while endings(&all) < turn as usize {
        all.push(stream.next(Duration::from_secs(10)).await.expect("event"));
    }
    for turn in 1..=turn {
        let of_turn: Vec<&Value> = all
            .iter()
            .filter(|e| {
                matches!(e["type"].as_str(), Some("TURN_ENDED" | "TURN_ERROR"))
                    && e["payload"]["turn"] == turn
            })
            .collect();
        assert_eq!(of_turn.len(), 1, "turn {turn}: {of_turn:#?}");
        let ending = of_turn[0];
        match answers.iter().find(|a| a.0 == turn) {
            Some(answer) if cancelled(answer) => {
                assert_eq!(ending["type"], "TURN_ERROR", "turn {turn}: {ending}");
                assert_eq!(
                    ending["payload"]["kind"], "cancelled",
                    "turn {turn}: {ending}"
                );
            }
            _ => assert_eq!(ending["type"], "TURN_ENDED", "turn {turn}: {ending}"),
        }
    }
    let won = answers.iter().filter(|a| cancelled(a)).count();
    let late = answers.iter().filter(|a| a.1 == 409).count();
    eprintln!(
        "cancel race: {turn} turns; the cancel won {won}, came after the end {late} (409), lost at the end {} (200, the turn's own ending)",
        answers.len() - won - late
    );
    // Nothing after the last ending: ending the session appends
    // SESSION_ENDED and ends the stream, so whatever came between is read.
    let (status, body) = server
        .post(&format!("/sessions/{session}/end"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let rest = stream.rest_until_end(Duration::from_secs(10)).await;
    assert_eq!(types(&rest), ["SESSION_ENDED"], "{rest:#?}");
}

/// The review's N10: an operator's cancel of an end user's turn shows the
/// end user "an operator", never the key's id or name; the end user's own
/// cancel says so.
#[tokio::test]
async fn an_end_user_reads_an_operator_not_a_key_in_a_cancel() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let manifest = "[app]\nslug = \"slow\"\n[agent]\nentry = \"agent.wasm\"\n[end_users]\n";
    let component = support::guest("slow");
    server
        .deploy_files(&[("agent.wasm", &component)], manifest)
        .await;
    let (key_id, key) = server.mint_key("platform", "Ana Oncall", None).await;
    let token = server.end_user_token("slow", "ada").await;
    for (canceller, by) in [(&key, "an operator"), (&token, "the end user")] {
        let body = json!({"app": "slow", "route": "/slow", "input": {"sleep_ms": 60_000}});
        let (status, created) = server.post_as(&token, "/sessions", body).await;
        assert_eq!(status, 201, "{created}");
        let session = created["session_id"].as_str().unwrap().to_string();
        let url = server.url(&format!("/sessions/{session}/events"));
        let response = server.client.get(url).bearer_auth(&token).send().await;
        let mut stream = support::EventStream::new(response.unwrap());
        until(&mut stream, "MESSAGE_DELTA").await;
        let path = format!("/sessions/{session}/cancel");
        let (status, view) = server.post_as(canceller, &path, json!({})).await;
        assert_eq!(status, 200, "{view}");
        let rest = until(&mut stream, "TURN_ERROR").await;
        let error = &rest.last().unwrap()["payload"];
        assert_eq!(error["message"], format!("the turn was cancelled by {by}"));
        let seen = serde_json::to_string(&rest).unwrap();
        assert!(
            !seen.contains(&key_id) && !seen.contains("Ana Oncall"),
            "the end user reads the operator's key: {seen}"
        );
    }
}

#[tokio::test]
async fn end_cancels_the_running_turn_then_journals_the_reason() {
    let (_dir, server) = server_with("slow").await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    let mut stream = server.events(&session, None).await;
    until(&mut stream, "MESSAGE_DELTA").await;
    let (status, view) = server
        .post(
            &format!("/sessions/{session}/end"),
            json!({"reason": "the user closed the chat"}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "ended", "{view}");
    let rest = until(&mut stream, "SESSION_ENDED").await;
    assert_eq!(
        types(&rest),
        ["MESSAGE_END", "TURN_ERROR", "SESSION_ENDED"],
        "{rest:#?}"
    );
    assert_eq!(rest[1]["payload"]["kind"], "cancelled");
    assert_eq!(
        rest[1]["payload"]["message"],
        "the turn was cancelled by an operator ending the session"
    );
    assert_eq!(rest[2]["payload"]["reason"], "the user closed the chat");
    assert_eq!(rest[2]["payload"]["key_id"], "bootstrap", "{rest:#?}");
    let (status, _) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "more"}),
        )
        .await;
    assert_eq!(status, 409);
    let (status, body) = server
        .post(&format!("/sessions/{session}/end"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
}

#[tokio::test]
async fn end_takes_no_body_and_drops_a_pending_approval() {
    let (_dir, server) = server_with("ops").await;
    let session = server.session("ops", "/ops", json!("delete apples")).await;
    let events = journal(&server, &session, &["TOOL_APPROVAL_REQUIRED", "TURN_ENDED"]).await;
    assert_eq!(
        events.last().unwrap()["type"],
        "TOOL_APPROVAL_REQUIRED",
        "{events:#?}"
    );
    // No body at all.
    let response = server
        .client
        .post(server.url(&format!("/sessions/{session}/end")))
        .bearer_auth(support::KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, approvals) = server.get("/approvals").await;
    assert!(
        !approvals.to_string().contains(&session),
        "no longer pending: {approvals}"
    );
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/approval"),
            json!({"approved": true, "approver": "ops"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let ended = journal(&server, &session, &["SESSION_ENDED"]).await;
    let last = ended.last().unwrap();
    assert_eq!(last["payload"], json!({"key_id": "bootstrap"}), "{last}");
}

#[tokio::test]
async fn delete_removes_the_session_and_ends_its_streams() {
    let (_dir, server) = server_with("hello").await;
    let session = server.session("hello", "/chat", json!("hi there")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TURN_ENDED"]).await;
    let other = server.session("hello", "/chat", json!("keep me")).await;
    let (_, invoke) = server.mint_key("invocation", "web", Some("hello")).await;
    let response = server
        .client
        .delete(server.url(&format!("/sessions/{session}")))
        .bearer_auth(&invoke)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403, "deleting needs a platform key");
    assert_eq!(server.delete(&format!("/sessions/{session}")).await, 204);
    // The open stream ends (not merely goes quiet).
    stream.expect_end(Duration::from_secs(5)).await;
    let (status, body) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(status, 404, "{body}");
    let response = server
        .client
        .get(server.url(&format!("/sessions/{session}/events")))
        .bearer_auth(support::KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(server.delete(&format!("/sessions/{session}")).await, 404);
    let (_, list) = server.get("/sessions").await;
    assert!(!list.to_string().contains(&session), "{list}");
    // Others are untouched.
    let kept = journal(&server, &other, &["TURN_ENDED"]).await;
    assert_eq!(kept.last().unwrap()["type"], "TURN_ENDED");
}

#[tokio::test]
async fn delete_cancels_a_running_turn_first() {
    let (_dir, server) = server_with("slow").await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    let mut stream = server.events(&session, None).await;
    until(&mut stream, "MESSAGE_DELTA").await;
    assert_eq!(server.delete(&format!("/sessions/{session}")).await, 204);
    // The stream may see the cancel's events before it ends; never more.
    let rest = stream.rest_until_end(Duration::from_secs(5)).await;
    assert!(rest.len() <= 2, "{rest:#?}");
    let (status, _) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn retention_purges_sessions_ended_long_enough_ago() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--retain-ended-sessions", "2s"]).await;
    server.deploy("hello", &support::guest("hello")).await;
    let ended = server.session("hello", "/chat", json!("bye")).await;
    journal(&server, &ended, &["TURN_ENDED"]).await;
    let (status, _) = server
        .post(&format!("/sessions/{ended}/end"), json!({}))
        .await;
    assert_eq!(status, 200);
    let idle = server.session("hello", "/chat", json!("stay")).await;
    journal(&server, &idle, &["TURN_ENDED"]).await;
    let started = std::time::Instant::now();
    loop {
        let (status, _) = server.get(&format!("/sessions/{ended}")).await;
        if status == 404 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the ended session was never purged"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, view) = server.get(&format!("/sessions/{idle}")).await;
    assert_eq!(status, 200, "a session that has not ended stays: {view}");
}

#[tokio::test]
async fn a_panic_in_host_code_ends_the_turn_with_internal() {
    let dir = support::data_dir();
    let server = Server::start_with_env(dir.path(), &[("AGENTHOST_TEST_PANIC_ON", "kaboom")]).await;
    server.deploy("hello", &support::guest("hello")).await;
    let session = server
        .session("hello", "/chat", json!("say kaboom now"))
        .await;
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let error = events.last().unwrap();
    assert_eq!(error["type"], "TURN_ERROR", "{events:#?}");
    assert_eq!(error["payload"]["kind"], "internal", "{error}");
    // The message the agent had open is closed, rebuilt from the journal.
    let ends = of_type(&events, "MESSAGE_END");
    assert_eq!(
        ends.last().unwrap()["payload"]["incomplete"],
        true,
        "{events:#?}"
    );
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "all good"}),
        )
        .await;
    assert_eq!(status, 202, "the session works again: {body}");
    let next = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(next.last().unwrap()["type"], "TURN_ENDED", "{next:#?}");
}
