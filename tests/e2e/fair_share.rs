//! Every principal's fair share of an app's frontend caps
//! (docs/limits.md#rate-limits-and-quotas, review 2026-12-01 N2): one end
//! user at full speed, and separately one source address with the shipped
//! invocation key, fill only their share (`--invocation-share-per-principal`)
//! of the app's open sessions and running turns, and of the key's event
//! streams, and get 429 naming the share; another end user's `POST
//! /sessions`, stream and AG-UI run, and another address's, still get in.
//! The shares are decided in the writer, so this runs on redb and
//! PostgreSQL alike. Addresses are told apart through `X-Forwarded-For`
//! from a trusted proxy (`--trusted-proxy`, the test's loopback). Sessions
//! idle past `--session-idle-secs` end (their journal kept) and so free
//! their place in the share. The bare key's rate is a bucket per address.

use serde_json::{Value, json};

use crate::support::{self, Server};

/// The app's open-session cap in this test; the share is 8 of it (1 % of
/// 20 rounded up is 1, and a share is at least 8).
const OPEN_CAP: usize = 20;
const SHARE: usize = 8;
/// Event streams per end user, and per address of the bare key.
const STREAMS_EACH: usize = 4;

fn create(sleep_ms: u64) -> Value {
    json!({"app": "slow", "route": "/slow", "input": {"sleep_ms": sleep_ms}})
}

/// POST /sessions as `key`, from `address` (through the trusted proxy).
async fn post_from(server: &Server, key: &str, address: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = server.client.post(server.url("/sessions")).bearer_auth(key);
    if let Some(address) = address {
        request = request.header("x-forwarded-for", address);
    }
    let response = request.json(&body).send().await.expect("POST");
    support::status_and_json(response).await
}

/// Opens `session`'s event stream as `key` from `address`: the status, and
/// on 200 the open response (the stream holds its place while it lives).
async fn stream_from(
    server: &Server,
    key: &str,
    address: Option<&str>,
    session: &str,
) -> (u16, Option<reqwest::Response>, Value) {
    let url = server.url(&format!("/sessions/{session}/events"));
    let mut request = server.client.get(url).bearer_auth(key);
    if let Some(address) = address {
        request = request.header("x-forwarded-for", address);
    }
    let response = request.send().await.expect("GET events");
    let status = response.status().as_u16();
    if status == 200 {
        return (status, Some(response), Value::Null);
    }
    let body = response.json().await.unwrap_or(Value::Null);
    (status, None, body)
}

/// Sends `body` `times` times; the sessions created, and the first refusal.
async fn flood(
    server: &Server,
    key: &str,
    address: Option<&str>,
    times: usize,
    sleep_ms: u64,
) -> (Vec<String>, Option<Value>) {
    let (mut created, mut refused) = (Vec::new(), None);
    for _ in 0..times {
        let (status, body) = post_from(server, key, address, create(sleep_ms)).await;
        match status {
            201 => created.push(body["session_id"].as_str().unwrap().to_string()),
            429 => {
                refused.get_or_insert(body);
            }
            other => panic!("{other}: {body}"),
        }
    }
    (created, refused)
}

fn assert_share_refusal(refused: Option<Value>, names: &str) {
    let refused = refused.expect("the flood was refused past its share");
    assert_eq!(refused["error"]["code"], "quota_exceeded", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--invocation-share-per-principal") && message.contains(names),
        "names the share and whose it is: {refused}"
    );
}

#[tokio::test]
async fn one_end_user_or_one_address_cannot_lock_the_others_out() {
    let dir = support::data_dir();
    let open_cap = OPEN_CAP.to_string();
    let streams_each = STREAMS_EACH.to_string();
    let server = Server::start_with(
        dir.path(),
        &[
            "--invocation-max-open-sessions-per-app",
            &open_cap,
            "--max-streams-per-key",
            "10",
            "--max-streams-per-end-user",
            &streams_each,
            "--trusted-proxy",
            "127.0.0.0/8,::1",
        ],
    )
    .await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    let (_, key) = server.mint_key("invocation", "web", Some("slow")).await;
    let mallory = server.end_user_token("slow", "mallory").await;
    let alice = server.end_user_token("slow", "alice").await;

    // One end user at full speed: their share, then 429 naming it. Each of
    // their sessions runs a turn for a minute, so they hold running turns too.
    let (held, refused) = flood(&server, &mallory, None, OPEN_CAP + 5, 60_000).await;
    assert_eq!(held.len(), SHARE, "mallory got exactly her share");
    assert_share_refusal(refused, "end user `mallory`");
    // One visitor with the shipped key, from one address: the same.
    let noisy = Some("198.51.100.7");
    let (visitor_held, refused) = flood(&server, &key, noisy, OPEN_CAP + 5, 60_000).await;
    assert_eq!(
        visitor_held.len(),
        SHARE,
        "the address got exactly its share"
    );
    assert_share_refusal(refused, "198.51.100.7");

    // Everyone else still gets in: another end user's session, stream and
    // AG-UI run, and another visitor of the shipped key.
    let (status, body) = post_from(&server, &alice, None, create(0)).await;
    assert_eq!(status, 201, "alice is not locked out: {body}");
    let own = body["session_id"].as_str().unwrap().to_string();
    let quiet = Some("203.0.113.9");
    let (status, body) = post_from(&server, &key, quiet, create(0)).await;
    assert_eq!(status, 201, "another visitor is not locked out: {body}");
    let theirs = body["session_id"].as_str().unwrap().to_string();

    // Streams: mallory holds her end user's cap of them, the noisy visitor
    // its address's share of the key's; neither takes anyone else's place.
    let mut open = Vec::new();
    for _ in 0..STREAMS_EACH {
        let (status, response, body) = stream_from(&server, &mallory, None, &held[0]).await;
        assert_eq!(status, 200, "{body}");
        open.push(response);
    }
    let (status, _, body) = stream_from(&server, &mallory, None, &held[0]).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("too_many_streams"))
    );
    for _ in 0..STREAMS_EACH {
        let (status, response, body) = stream_from(&server, &key, noisy, &visitor_held[0]).await;
        assert_eq!(status, 200, "{body}");
        open.push(response);
    }
    let (status, _, body) = stream_from(&server, &key, noisy, &visitor_held[0]).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("198.51.100.7") && message.contains("share"),
        "names the address's share: {body}"
    );
    let (status, alices, body) = stream_from(&server, &alice, None, &own).await;
    assert_eq!(status, 200, "alice's stream opens: {body}");
    let (status, visitors, body) = stream_from(&server, &key, quiet, &theirs).await;
    assert_eq!(status, 200, "the other visitor's stream opens: {body}");

    // An AG-UI run of alice's: a new thread is a new session and a turn.
    let run = json!({
        "threadId": "alices-thread", "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let response = (server.client.post(server.url("/ag-ui/slow/slow")))
        .bearer_auth(&alice)
        .json(&run)
        .send()
        .await
        .expect("POST ag-ui");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(status, 200, "alice's AG-UI run starts: {text}");
    assert!(text.contains("RUN_STARTED"), "{text}");

    // The refusals are counted by share.
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(r#"cap="open_sessions_share""#),
        "{metrics}"
    );
    drop((open, alices, visitors));
}

#[tokio::test]
async fn idle_sessions_end_and_free_their_place() {
    let dir = support::data_dir();
    let open_cap = OPEN_CAP.to_string();
    let flags = [
        "--invocation-max-open-sessions-per-app",
        &open_cap,
        "--session-idle-secs",
        "2",
    ];
    let server = Server::start_with(dir.path(), &flags).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    let mallory = server.end_user_token("slow", "mallory").await;
    // A platform key's session: the backend's to end, never swept.
    let platform = server
        .session("slow", "/slow", json!({"sleep_ms": 0}))
        .await;
    // Her share of quick sessions, each idle once its turn ends.
    let (held, refused) = flood(&server, &mallory, None, SHARE + 1, 0).await;
    assert_eq!(held.len(), SHARE);
    assert_share_refusal(refused, "end user `mallory`");
    // Once they have been idle for 2 s, the sweep ends them: she gets in again.
    let mut status = 0;
    for _ in 0..300 {
        let (s, body) = post_from(&server, &mallory, None, create(0)).await;
        status = s;
        if s == 201 {
            break;
        }
        assert_eq!(s, 429, "{body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 201, "idle sessions never freed her share");
    // Ended with the reason, their journal kept (the sweep ends them one
    // after another: the first freed place let her in).
    let mut record = Value::Null;
    for _ in 0..100 {
        (_, record) = server.get(&format!("/sessions/{}", held[0])).await;
        if record["status"] == "ended" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(record["status"], "ended", "{record}");
    let events = (server.events(&held[0], None).await)
        .until(&["SESSION_ENDED"])
        .await;
    let ended = events.last().unwrap();
    let reason = ended["payload"]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("idle"), "{ended}");
    assert!(
        events.iter().any(|e| e["type"] == "TURN_ENDED"),
        "the journal is kept: {events:?}"
    );
    let (_, record) = server.get(&format!("/sessions/{platform}")).await;
    assert_eq!(record["status"], "idle", "{record}");
}

#[tokio::test]
async fn the_bare_key_has_a_rate_bucket_per_address() {
    let dir = support::data_dir();
    let flags = [
        "--invocation-rate-limit",
        "1",
        "--invocation-rate-limit-burst",
        "2",
        "--trusted-proxy",
        "127.0.0.0/8,::1",
    ];
    let server = Server::start_with(dir.path(), &flags).await;
    let row = server.deploy("slow", &support::guest("slow")).await;
    assert_eq!(row["status"], "active", "{row}");
    let (_, key) = server.mint_key("invocation", "web", Some("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 0}))
        .await;
    let path = format!("/sessions/{session}");
    let get_from = |address: &'static str| {
        let request = (server.client.get(server.url(&path)))
            .bearer_auth(&key)
            .header("x-forwarded-for", address);
        async move { support::status_and_json(request.send().await.expect("GET")).await }
    };
    // One visitor spends its own bucket...
    let mut refusal = None;
    for _ in 0..4 {
        let (status, body) = get_from("198.51.100.7").await;
        if status == 429 {
            refusal = Some(body);
        }
    }
    let refusal = refusal.expect("the noisy address was refused");
    assert_eq!(refusal["error"]["code"], "rate_limited", "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("198.51.100.7"), "{refusal}");
    // ...and another visitor of the same key still gets in.
    let (status, body) = get_from("203.0.113.9").await;
    assert_eq!(status, 200, "{body}");
}
