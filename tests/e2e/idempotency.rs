//! `Idempotency-Key` on the four POSTs that do work: a retry gets the first
//! answer and the work is done once (also when it races the first attempt);
//! the same key on another request is 422; a new key is new work; and a
//! process killed between the commit and the response
//! (`AGENTHOST_TEST_EXIT_AFTER_COMMIT`) leaves the first answer for the
//! retry after the restart. Expiry is tested at the domain level
//! (`host/src/store/idempotency_tests.rs`).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, KEY, Server, bundle, status_and_json};

const MANIFEST: &str = "[app]\nslug = \"ops\"\n[agent]\nentry = \"ops.wasm\"\n";

/// POSTs `body` with `Idempotency-Key: key`; `Err` when no response came.
async fn post(
    server: &Server,
    path: &str,
    key: &str,
    body: &Value,
) -> Result<(u16, Value), String> {
    let response = server
        .client
        .post(server.url(path))
        .bearer_auth(KEY)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(status_and_json(response).await)
}

/// Uploads the ops bundle (with `manifest`) with `Idempotency-Key: key`.
/// Each call builds its multipart body afresh (a new boundary), as a
/// client's retry would.
async fn upload(server: &Server, key: &str, manifest: &str) -> Result<(u16, Value), String> {
    let form = reqwest::multipart::Form::new()
        .part(
            "tarball",
            reqwest::multipart::Part::bytes(bundle(&[("ops.wasm", &support::guest("ops"))]))
                .file_name("b.tar"),
        )
        .text("manifest", manifest.to_string());
    let response = server
        .client
        .post(server.url("/deployments"))
        .bearer_auth(KEY)
        .header("Idempotency-Key", key)
        .multipart(form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(status_and_json(response).await)
}

async fn deployments(server: &Server) -> Vec<Value> {
    let (status, rows) = server.get("/apps/ops/deployments").await;
    assert_eq!(status, 200, "{rows}");
    rows.as_array().cloned().unwrap_or_default()
}

async fn session_ids(server: &Server) -> Vec<String> {
    let (status, page) = server.get("/sessions?app=ops").await;
    assert_eq!(status, 200, "{page}");
    (page["items"].as_array().into_iter().flatten())
        .map(|s| s["session_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

fn assert_reused(status: u16, body: &Value) {
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "idempotency_key_reused", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Idempotency-Key"))
    );
}

#[tokio::test]
async fn a_retry_of_each_endpoint_gets_the_first_answer_and_the_work_is_done_once() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;

    // POST /deployments: one version, whatever the retries (new boundaries).
    let (status, first) = upload(&server, "deploy-1", MANIFEST).await.unwrap();
    assert_eq!(status, 202, "{first}");
    let (status, again) = upload(&server, "deploy-1", MANIFEST).await.unwrap();
    assert_eq!((status, &again), (202, &first));
    let built = server.wait_built(&first).await;
    assert_eq!(built["status"], "active", "{built}");
    // After the build, a retry still answers the first 202 row.
    let (status, later) = upload(&server, "deploy-1", MANIFEST).await.unwrap();
    assert_eq!((status, &later), (202, &first));
    assert_eq!(deployments(&server).await.len(), 1);
    let other = format!("{MANIFEST}[tools.archive_record]\nneeds_approval = true\n");
    let (status, body) = upload(&server, "deploy-1", &other).await.unwrap();
    assert_reused(status, &body);
    assert_eq!(deployments(&server).await.len(), 1);

    // POST /sessions: the first session, its body, a fresh stream token.
    let create = json!({"app": "ops", "route": "/ops", "input": "delete x"});
    let (status, created) = post(&server, "/sessions", "create-1", &create)
        .await
        .unwrap();
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().unwrap().to_string();
    // Whitespace and key order are not the request: the same body.
    let reordered = json!({"input": "delete x", "route": "/ops", "app": "ops"});
    let (status, retried) = post(&server, "/sessions", "create-1", &reordered)
        .await
        .unwrap();
    assert_eq!(status, 201, "{retried}");
    assert_eq!(retried["session"], created["session"]);
    assert_eq!(retried["session_id"], created["session_id"]);
    assert!(
        retried["stream_token"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(session_ids(&server).await, vec![session.clone()]);
    let other = json!({"app": "ops", "route": "/ops", "input": "delete y"});
    let (status, body) = post(&server, "/sessions", "create-1", &other)
        .await
        .unwrap();
    assert_reused(status, &body);
    // The same key on another endpoint is another request too.
    let (status, body) = post(
        &server,
        &format!("/sessions/{session}/input"),
        "create-1",
        &json!({"input": "delete x"}),
    )
    .await
    .unwrap();
    assert_reused(status, &body);
    assert_eq!(session_ids(&server).await.len(), 1);
    // Racing retries: one session.
    let race = json!({"app": "ops", "route": "/ops", "input": "add r"});
    let (a, b) = tokio::join!(
        post(&server, "/sessions", "race-1", &race),
        post(&server, "/sessions", "race-1", &race)
    );
    let ((status_a, a), (status_b, b)) = (a.unwrap(), b.unwrap());
    assert_eq!((status_a, status_b), (201, 201), "{a} {b}");
    assert_eq!(a["session_id"], b["session_id"]);
    // A new key is new work.
    let (status, fresh) = post(&server, "/sessions", "create-2", &race).await.unwrap();
    assert_eq!(status, 201, "{fresh}");
    assert_ne!(fresh["session_id"], a["session_id"]);
    assert_eq!(session_ids(&server).await.len(), 3);

    // POST /sessions/{id}/approval: one decision.
    let mut stream = server.events(&session, None).await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    let path = format!("/sessions/{session}/approval");
    let decision = json!({"approved": true, "approver": "ops-lead"});
    let (status, decided) = post(&server, &path, "decide-1", &decision).await.unwrap();
    assert_eq!(status, 202, "{decided}");
    let (status, redecided) = post(&server, &path, "decide-1", &decision).await.unwrap();
    assert_eq!((status, &redecided), (202, &decided));
    let denial = json!({"approved": false});
    let (status, body) = post(&server, &path, "decide-1", &denial).await.unwrap();
    assert_reused(status, &body);
    stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;

    // POST /sessions/{id}/input: one turn.
    let path = format!("/sessions/{session}/input");
    let input = json!({"input": "add z"});
    let (status, sent) = post(&server, &path, "input-1", &input).await.unwrap();
    assert_eq!(status, 202, "{sent}");
    assert_eq!(sent["turn"], 3);
    stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let (status, resent) = post(&server, &path, "input-1", &input).await.unwrap();
    assert_eq!((status, &resent), (202, &sent));
    // A new key: a new turn.
    let (status, next) = post(&server, &path, "input-2", &input).await.unwrap();
    assert_eq!(status, 202, "{next}");
    assert_eq!(next["turn"], 4);
    stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    let events = server.journal(&session, 3).await;
    assert_eq!(count(&events, "SESSION_CREATED"), 1);
    assert_eq!(count(&events, "TOOL_APPROVAL_GRANTED"), 1);
    assert_eq!(count(&events, "TURN_STARTED"), 4);

    // A key must be 1 to 255 visible ASCII characters.
    for bad in ["has space", &"k".repeat(256)] {
        let (status, body) = post(&server, "/sessions", bad, &race).await.unwrap();
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["code"], "invalid_idempotency_key");
    }
    assert_eq!(session_ids(&server).await.len(), 3);
}

/// Starts a server that exits right after committing a POST to a path
/// ending with `suffix` (none: a normal server).
async fn start(dir: &Path, suffix: Option<&str>) -> Server {
    match suffix {
        Some(suffix) => {
            Server::start_with_env(dir, &[("AGENTHOST_TEST_EXIT_AFTER_COMMIT", suffix)]).await
        }
        None => Server::start(dir).await,
    }
}

/// The request got no response, and the process exited as if killed.
async fn crashed(mut server: Server, sent: Result<(u16, Value), String>) {
    assert!(sent.is_err(), "the response was written: {sent:?}");
    let status = server.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(137), "{status:?}");
}

#[tokio::test]
async fn a_crash_between_the_commit_and_the_response_leaves_the_first_answer_for_the_retry() {
    let dir = support::data_dir();

    // POST /deployments: committed, not answered.
    let server = start(dir.path(), Some("/deployments")).await;
    let sent = upload(&server, "deploy-1", MANIFEST).await;
    crashed(server, sent).await;
    let server = start(dir.path(), Some("/sessions")).await;
    let (status, row) = upload(&server, "deploy-1", MANIFEST).await.unwrap();
    assert_eq!(status, 202, "{row}");
    let rows = deployments(&server).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["id"], row["id"]);
    // The interrupted build resumed after the restart.
    assert_eq!(server.wait_built(&row).await["status"], "active");

    // POST /sessions.
    let create = json!({"app": "ops", "route": "/ops", "input": "add a"});
    let sent = post(&server, "/sessions", "create-1", &create).await;
    crashed(server, sent).await;
    let server = start(dir.path(), Some("/approval")).await;
    let (status, created) = post(&server, "/sessions", "create-1", &create)
        .await
        .unwrap();
    assert_eq!(status, 201, "{created}");
    let ids = session_ids(&server).await;
    assert_eq!(
        ids,
        vec![created["session_id"].as_str().unwrap().to_string()]
    );

    // POST /sessions/{id}/approval (on a session of its own: the crashed
    // one's turn may have been cut short).
    let session = server.session("ops", "/ops", json!("delete x")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    let path = format!("/sessions/{session}/approval");
    let decision = json!({"approved": true});
    let sent = post(&server, &path, "decide-1", &decision).await;
    crashed(server, sent).await;
    let server = start(dir.path(), Some("/input")).await;
    let (status, decided) = post(&server, &path, "decide-1", &decision).await.unwrap();
    assert_eq!(status, 202, "{decided}");
    assert_eq!(decided["turn"], 2);
    let mut stream = server.events(&session, None).await;
    let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
    assert_eq!(count(&events, "TOOL_APPROVAL_GRANTED"), 1);

    // POST /sessions/{id}/input.
    let path = format!("/sessions/{session}/input");
    let input = json!({"input": "add b"});
    let sent = post(&server, &path, "input-1", &input).await;
    crashed(server, sent).await;
    let server = start(dir.path(), None).await;
    let (status, sent) = post(&server, &path, "input-1", &input).await.unwrap();
    assert_eq!(status, 202, "{sent}");
    assert_eq!(sent["turn"], 3);
    let events = server.journal(&session, 2).await;
    assert_eq!(count(&events, "TURN_STARTED"), 3, "{events:?}");
    assert_eq!(session_ids(&server).await.len(), 2);
}
