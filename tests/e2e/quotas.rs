//! Rate limits and quotas (docs/limits.md#rate-limits-and-quotas): a burst
//! over a key's rate gets 429 `rate_limited` with Retry-After and recovers
//! after it, opening a stream counted like any request, while other keys
//! and metrics go on; event streams open at once are capped per key (with
//! its stream tokens) and per end user; the per-app caps
//! on running turns and open sessions refuse with 429 `quota_exceeded`,
//! exactly at the cap under concurrent requests, and accept again once a
//! turn or a session ends; every refusal is counted in `GET /metrics`.

use serde_json::{Value, json};

use crate::support::{self, KEY, Server, sample};

async fn server_with(flags: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), flags).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    (dir, server)
}

fn assert_quota(status: u16, body: &Value, flag: &str) {
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(flag),
        "names the cap and its value: {body}"
    );
}

#[tokio::test]
async fn a_burst_over_the_key_rate_gets_429_with_retry_after_and_recovers() {
    let dir = support::data_dir();
    let server = Server::start_with(
        dir.path(),
        &["--rate-limit", "1", "--rate-limit-burst", "3"],
    )
    .await;
    // A second key, minted before the burst: each key has its own bucket.
    let (_, other) = server.mint_key("platform", "other", None).await;
    let mut statuses = Vec::new();
    let mut refused = None;
    // Until the first refusal: the bucket refills one token a second, so
    // requests sent back to back empty it however slow the machine (a
    // fixed count could all fit in the refills of a slow run).
    while refused.is_none() {
        assert!(statuses.len() < 1000, "never refused: {statuses:?}");
        let response = (server.client.get(server.url("/apps")))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("GET /apps");
        statuses.push(response.status().as_u16());
        if response.status() == 429 && refused.is_none() {
            let retry_after = (response.headers().get("retry-after"))
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .expect("a Retry-After of whole seconds");
            let body: Value = response.json().await.expect("a JSON error");
            refused = Some((retry_after, body));
        }
    }
    // The burst passes (the mint took one token of it), then the rate holds.
    assert_eq!(&statuses[..2], [200, 200], "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
    let (retry_after, body) = refused.expect("a refusal");
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");

    // Opening an event stream counts like any request: refused too (it is
    // refused before the session is looked up, or this would be a 404).
    let stream = (server.client)
        .get(server.url(&format!("/sessions/{}/events", uuid::Uuid::nil())))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("GET events");
    assert_eq!(stream.status(), 429, "a stream's open is rate limited");
    statuses.push(429);
    // Meanwhile: another key and /metrics are not refused.
    let (status, _) = server.get_as(&other, "/apps").await;
    assert_eq!(status, 200);
    let text = server.metrics().await;
    let refusals = statuses.iter().filter(|s| **s == 429).count() as f64;
    assert!(
        sample(&text, "agenthost_rate_limited_total") >= refusals,
        "{text}"
    );

    // After the wait it asked for, the key gets in again.
    tokio::time::sleep(std::time::Duration::from_secs(retry_after)).await;
    let (status, apps) = server.get("/apps").await;
    assert_eq!(status, 200, "{apps}");
}

#[tokio::test]
async fn the_running_turns_cap_refuses_until_a_turn_ends() {
    let (_dir, server) = server_with(&["--max-running-turns-per-app", "1"]).await;
    let long = json!({"sleep_ms": 60_000});
    let first = server.session("slow", "/slow", long.clone()).await;
    // A new session would start a second turn: refused, and not created.
    let body = json!({"app": "slow", "route": "/slow", "input": long});
    let (status, refused) = server.post("/sessions", body.clone()).await;
    assert_quota(status, &refused, "--max-running-turns-per-app 1");
    let (_, sessions) = server.get("/sessions?app=slow").await;
    assert_eq!(
        sessions["items"].as_array().map(Vec::len),
        Some(1),
        "{sessions}"
    );

    // The turn ends (cancelled): the next one is accepted.
    let (status, view) = (server.post(&format!("/sessions/{first}/cancel"), json!({}))).await;
    assert_eq!(status, 200, "{view}");
    let (status, created) = server.post("/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    let second = created["session_id"].as_str().unwrap().to_string();

    // Input to the first session would be a second running turn too.
    let input = format!("/sessions/{first}/input");
    let (status, refused) = server.post(&input, json!({"input": {"sleep_ms": 0}})).await;
    assert_quota(status, &refused, "--max-running-turns-per-app 1");
    let (status, view) = (server.post(&format!("/sessions/{second}/cancel"), json!({}))).await;
    assert_eq!(status, 200, "{view}");
    let (status, accepted) = server.post(&input, json!({"input": {"sleep_ms": 0}})).await;
    assert_eq!(status, 202, "{accepted}");

    let text = server.metrics().await;
    assert_eq!(
        sample(
            &text,
            "agenthost_quota_refusals_total{cap=\"running_turns\"}"
        ),
        2.0,
        "{text}"
    );
}

#[tokio::test]
async fn the_open_sessions_cap_is_exact_under_concurrent_creates_and_frees_on_end() {
    let (_dir, server) = server_with(&["--max-open-sessions-per-app", "3"]).await;
    // Ten creates at once: exactly three get in.
    let creates = (0..10).map(|_| {
        server.post(
            "/sessions",
            json!({"app": "slow", "route": "/slow", "input": {"sleep_ms": 0}}),
        )
    });
    let answers = futures::future::join_all(creates).await;
    let created: Vec<String> = (answers.iter())
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| body["session_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(created.len(), 3, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 201) {
        assert_quota(*status, body, "--max-open-sessions-per-app 3");
    }
    let text = server.metrics().await;
    assert_eq!(
        sample(
            &text,
            "agenthost_quota_refusals_total{cap=\"open_sessions\"}"
        ),
        7.0,
        "{text}"
    );

    // Ending one frees its place (its turn first finishes: end needs an idle session).
    let ended = &created[0];
    server
        .events(ended, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    let (status, view) = (server.post(&format!("/sessions/{ended}/end"), json!({}))).await;
    assert_eq!(status, 200, "{view}");
    let fourth = server
        .session("slow", "/slow", json!({"sleep_ms": 0}))
        .await;
    assert!(!created.contains(&fourth));
    let (status, refused) = server
        .post(
            "/sessions",
            json!({"app": "slow", "route": "/slow", "input": {"sleep_ms": 0}}),
        )
        .await;
    assert_quota(status, &refused, "--max-open-sessions-per-app 3");
}

/// Opens the event stream of `session` with `key` (or a stream token) and
/// returns the answer's status and, on 200, the open response.
async fn open_stream(
    server: &Server,
    session: &str,
    key: Option<&str>,
    token: Option<&str>,
) -> (u16, Option<reqwest::Response>, Value) {
    let mut url = server.url(&format!("/sessions/{session}/events"));
    if let Some(token) = token {
        url = format!("{url}?token={token}");
    }
    let mut request = server.client.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("GET events");
    let status = response.status().as_u16();
    if status == 200 {
        return (status, Some(response), Value::Null);
    }
    let body = response.json().await.unwrap_or(Value::Null);
    (status, None, body)
}

fn assert_too_many(status: u16, body: &Value, flag: &str) {
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(flag), "names the cap: {body}");
}

#[tokio::test]
async fn streams_open_at_once_are_capped_per_key_and_per_end_user() {
    let (_dir, server) = server_with(&[
        "--max-streams-per-key",
        "2",
        "--max-streams-per-end-user",
        "1",
    ])
    .await;
    // A session that never ends: its streams stay open.
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 0}))
        .await;
    let (status, first, _) = open_stream(&server, &session, Some(KEY), None).await;
    assert_eq!(status, 200);
    let (status, second, _) = open_stream(&server, &session, Some(KEY), None).await;
    assert_eq!(status, 200);
    let (status, _, body) = open_stream(&server, &session, Some(KEY), None).await;
    assert_too_many(status, &body, "--max-streams-per-key 2");
    // The key's stream tokens count with it.
    let (status, minted) = server
        .post(&format!("/sessions/{session}/stream-token"), json!({}))
        .await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["stream_token"].as_str().unwrap();
    let (status, _, body) = open_stream(&server, &session, None, Some(token)).await;
    assert_too_many(status, &body, "--max-streams-per-key 2");
    // Another key has its own count.
    let (_, other) = server.mint_key("platform", "other", None).await;
    let (status, third, _) = open_stream(&server, &session, Some(&other), None).await;
    assert_eq!(status, 200);

    // An end user has a cap of their own.
    let user = server.end_user_token("slow", "ada").await;
    let (status, created) = server
        .post_as(
            &user,
            "/sessions",
            json!({"app": "slow", "route": "/slow", "input": {"sleep_ms": 0}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let own = created["session_id"].as_str().unwrap().to_string();
    let (status, held, _) = open_stream(&server, &own, Some(&user), None).await;
    assert_eq!(status, 200);
    let (status, _, body) = open_stream(&server, &own, Some(&user), None).await;
    assert_too_many(status, &body, "--max-streams-per-end-user 1");

    // A stream the client closes gives its place back (once the server
    // sees the connection go).
    drop(first);
    let mut reopened = None;
    for _ in 0..200 {
        let (status, response, body) = open_stream(&server, &session, Some(KEY), None).await;
        if status == 200 {
            reopened = response;
            break;
        }
        assert_too_many(status, &body, "--max-streams-per-key 2");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        reopened.is_some(),
        "a closed stream's place was never freed"
    );
    let text = server.metrics().await;
    assert!(
        sample(&text, "agenthost_streams_refused_total") >= 3.0,
        "{text}"
    );
    drop((second, third, held, reopened));
}

#[tokio::test]
async fn turns_past_the_queue_bound_get_503_until_the_queue_moves() {
    let (_dir, server) =
        server_with(&["--max-concurrent-turns", "1", "--max-queued-turns", "1"]).await;
    let long = json!({"sleep_ms": 60_000});
    // The first turn holds the one slot (it is running: its message started)...
    let first = server.session("slow", "/slow", long.clone()).await;
    let mut stream = server.events(&first, None).await;
    stream.until(&["MESSAGE_START"]).await;
    // ...the second waits for it...
    let second = server.session("slow", "/slow", long.clone()).await;
    // ...and a third would wait too: refused before anything is committed.
    let body = json!({"app": "slow", "route": "/slow", "input": long});
    let response = (server.client.post(server.url("/sessions")))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .expect("POST /sessions");
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let refused: Value = response.json().await.expect("a JSON error");
    assert_eq!(refused["error"]["code"], "overloaded", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-queued-turns 1"), "{refused}");
    let (_, sessions) = server.get("/sessions?app=slow").await;
    assert_eq!(
        sessions["items"].as_array().map(Vec::len),
        Some(2),
        "{sessions}"
    );

    // The first ends: the second takes the slot, and the queue has room.
    let (status, view) = (server.post(&format!("/sessions/{first}/cancel"), json!({}))).await;
    assert_eq!(status, 200, "{view}");
    server
        .events(&second, None)
        .await
        .until(&["MESSAGE_START"])
        .await;
    let (status, created) = server.post("/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    let text = server.metrics().await;
    assert_eq!(
        sample(
            &text,
            "agenthost_quota_refusals_total{cap=\"queued_turns\"}"
        ),
        1.0,
        "{text}"
    );
}

#[tokio::test]
async fn invocation_keys_and_end_users_have_a_lower_rate_of_their_own() {
    let (_dir, server) = server_with(&[
        "--invocation-rate-limit",
        "1",
        "--invocation-rate-limit-burst",
        "2",
    ])
    .await;
    let (_, invocation) = server.mint_key("invocation", "web", Some("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 0}))
        .await;
    let path = format!("/sessions/{session}");
    let mut statuses = Vec::new();
    let mut refusal = Value::Null;
    for _ in 0..4 {
        let (status, body) = server.get_as(&invocation, &path).await;
        statuses.push(status);
        if status == 429 {
            refusal = body;
        }
    }
    assert_eq!(statuses[..2], [200, 200], "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
    assert_eq!(refusal["error"]["code"], "rate_limited", "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--invocation-rate-limit"), "{refusal}");
    // An end user has a bucket of their own, under the same rate.
    let user = server.end_user_token("slow", "ada").await;
    let (status, body) = server.get_as(&user, "/sessions").await;
    assert_eq!(status, 200, "{body}");
    // Platform keys keep --rate-limit (default 5 000 a second).
    for _ in 0..10 {
        let (status, body) = server.get(&path).await;
        assert_eq!(status, 200, "{body}");
    }
}
