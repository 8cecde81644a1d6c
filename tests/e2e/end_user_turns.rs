//! One end user's share of turns (`[end_users] turns_per_minute_per_user`,
//! docs/end-users.md): past it a new session or an input of that user is
//! 429 `quota_exceeded` with `Retry-After`, counted in `/metrics`; another
//! user's share is their own; an input a platform key sends is not the
//! user's; a request refused for another reason (409) gives its place back.
//! Across two hosts: `cluster_end_users.rs`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::end_user_revocation::{deploy_shop, try_create};
use crate::support::{self, Server};

pub const MANIFEST: &str = "[app]\nslug = \"shop\"\n[agent]\nentry = \"agent.wasm\"\n\
                            [end_users]\nturns_per_minute_per_user = 3\n";

/// Waits until `session` has no turn running.
async fn settled(server: &Server, session: &str) {
    let started = Instant::now();
    loop {
        let (_, body) = server.get(&format!("/sessions/{session}")).await;
        if body["status"] != "running" {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `POST /sessions/{id}/input` as `token`: status, body, `Retry-After`.
async fn input(server: &Server, token: &str, session: &str) -> (u16, Value, Option<u64>) {
    let url = server.url(&format!("/sessions/{session}/input"));
    let request = server.client.post(url).bearer_auth(token);
    let response = request
        .json(&json!({"input": "again"}))
        .send()
        .await
        .unwrap();
    let retry_after = (response.headers().get("retry-after"))
        .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    let (status, body) = support::status_and_json(response).await;
    (status, body, retry_after)
}

fn id(created: &(u16, Value)) -> String {
    assert_eq!(created.0, 201, "{}", created.1);
    created.1["session_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_end_user_starts_at_most_their_share_of_turns_a_minute() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_shop(&server, MANIFEST).await;
    let ada = server.end_user_token("shop", "ada").await;
    let bob = server.end_user_token("shop", "bob").await;

    // Turn 1; an input her ended session refuses (409) gives its place back.
    let first = id(&try_create(&server, &ada).await);
    settled(&server, &first).await;
    let (status, body) = server
        .post_as(&ada, &format!("/sessions/{first}/end"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body, _) = input(&server, &ada, &first).await;
    assert_eq!(status, 409, "{body}");
    // Turns 2 and 3.
    let second = id(&try_create(&server, &ada).await);
    settled(&server, &second).await;
    let (status, body, _) = input(&server, &ada, &second).await;
    assert_eq!(status, 202, "{body}");
    settled(&server, &second).await;

    // The fourth within the minute: refused, with when to retry.
    let (status, body, retry_after) = input(&server, &ada, &second).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("quota_exceeded")),
        "{body}"
    );
    let retry_after = retry_after.expect("Retry-After");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("turns_per_minute_per_user"),
        "{body}"
    );
    let (status, body) = try_create(&server, &ada).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("quota_exceeded")),
        "{body}"
    );
    // Nothing was started: her session is as it was.
    let (_, session) = server.get(&format!("/sessions/{second}")).await;
    assert_eq!(session["turn"], 2, "{session}");

    // Bob's share is his own; an operator's input is not Ada's.
    id(&try_create(&server, &bob).await);
    let (status, body, _) = input(&server, support::KEY, &second).await;
    assert_eq!(status, 202, "{body}");

    let metrics = server.metrics().await;
    let line = (metrics.lines())
        .find(|l| l.contains(r#"cap="turns_per_minute_per_user""#) && !l.starts_with('#'))
        .unwrap_or_else(|| panic!("{metrics}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(count, 2.0, "{line}");
}

/// `tools/call` of the app's `/chat` tool over MCP as `token`: the HTTP
/// status and the body's text.
async fn mcp_call(server: &Server, token: &str, arguments: Value) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "shop_chat", "arguments": arguments}});
    let request = server.client.post(server.url("/mcp")).bearer_auth(token);
    let request = request.header("accept", "application/json, text/event-stream");
    let response = request.json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn an_end_users_mcp_calls_count_against_their_share_too() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_shop(&server, MANIFEST).await;
    let ada = server.end_user_token("shop", "ada").await;
    // A new session, then two more turns of it: her three.
    let (status, text) = mcp_call(&server, &ada, json!({"message": "one"})).await;
    assert_eq!(status, 200, "{text}");
    let (_, page) = server.get_as(&ada, "/sessions").await;
    let session = page["items"][0]["session_id"].as_str().unwrap().to_string();
    for message in ["two", "three"] {
        let arguments = json!({"message": message, "session_id": session});
        let (status, text) = mcp_call(&server, &ada, arguments).await;
        assert_eq!(status, 200, "{text}");
        settled(&server, &session).await;
    }
    let arguments = json!({"message": "four", "session_id": session});
    let (status, text) = mcp_call(&server, &ada, arguments).await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("quota_exceeded"), "{text}");
    let (_, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(view["turn"], 3, "{view}");
}
