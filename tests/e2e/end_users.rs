//! End users as principals (docs/end-users.md), with tokens the server
//! mints: two users of one app cannot read, stream, send input to, cancel,
//! end or list each other's sessions (404 everywhere); the same AG-UI
//! `threadId` and the same `Idempotency-Key` from two users make two
//! sessions; `[end_users] required` refuses the bare invocation key; a
//! guessable `threadId` or `Idempotency-Key` with a bare invocation key is
//! 422; only the claims the app lists reach the journal, and the agent
//! (the Rust SDK's `turn.end_user()`, through `examples/hello`); a forged
//! token, and a token for another app, are refused with their codes.

use serde_json::{Value, json};

use crate::support::{self, Server, bundle};

const MANIFEST: &str = "[app]\nslug = \"shop\"\n[agent]\nentry = \"agent.wasm\"\n\
                        [end_users]\nclaims = [\"email\"]\n";

async fn shop() -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_shop(&server, MANIFEST).await;
    (dir, server)
}

async fn deploy_shop(server: &Server, manifest: &str) {
    let component = support::guest("hello");
    server
        .deploy_files(&[("agent.wasm", &component)], manifest)
        .await;
}

/// `method path` with `token` as the bearer (and `body` as JSON for a POST).
async fn call(server: &Server, token: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let request = match method {
        "GET" => server.client.get(server.url(path)),
        "POST" => server.client.post(server.url(path)).json(&body),
        "DELETE" => server.client.delete(server.url(path)),
        other => panic!("no method {other}"),
    };
    let response = request.bearer_auth(token).send().await.expect(path);
    let status = response.status().as_u16();
    // An event stream answers 200 and stays open: its status is enough.
    if status == 200 && path.ends_with("/events") {
        return (status, Value::Null);
    }
    support::status_and_json(response).await
}

/// `POST /sessions` of `shop` with `token`.
async fn try_create(server: &Server, token: &str, input: &str) -> (u16, Value) {
    let body = json!({"app": "shop", "route": "/chat", "input": input});
    call(server, token, "POST", "/sessions", body).await
}

async fn create(server: &Server, token: &str, input: &str) -> Value {
    let (status, body) = try_create(server, token, input).await;
    assert_eq!(status, 201, "{body}");
    body
}

/// The whole journal of a session through its first terminal event, read
/// with the session's stream token.
async fn first_turn(server: &Server, created: &Value) -> Vec<Value> {
    read_until(server, created, "TURN_ENDED").await
}

/// A session's journal from the start through the first event of type
/// `until` (or a TURN_ERROR), read with the session's stream token.
async fn read_until(server: &Server, created: &Value, until: &str) -> Vec<Value> {
    let token = created["stream_token"].as_str().unwrap();
    let session = created["session_id"].as_str().unwrap();
    let url = server.url(&format!("/sessions/{session}/events?token={token}"));
    let response = server.client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    support::EventStream::new(response)
        .until(&[until, "TURN_ERROR"])
        .await
}

#[tokio::test]
async fn two_users_of_one_app_never_reach_each_others_sessions() {
    let (_dir, server) = shop().await;
    let ada = server.end_user_token("shop", "ada").await;
    let bob = server.end_user_token("shop", "bob").await;
    let created = create(&server, &ada, "my card is 4111").await;
    assert_eq!(created["end_user"], "ada", "{created}");
    let journal = first_turn(&server, &created).await;
    assert_eq!(journal.last().unwrap()["type"], "TURN_ENDED");
    let session = created["session_id"].as_str().unwrap();

    // Everything Bob could try on Ada's session is a 404, as if it did not exist.
    let attempts = [
        ("GET", format!("/sessions/{session}"), Value::Null),
        ("GET", format!("/sessions/{session}/events"), Value::Null),
        (
            "POST",
            format!("/sessions/{session}/stream-token"),
            json!({}),
        ),
        (
            "POST",
            format!("/sessions/{session}/input"),
            json!({"input": "hi"}),
        ),
        ("POST", format!("/sessions/{session}/cancel"), json!({})),
        ("POST", format!("/sessions/{session}/end"), json!({})),
    ];
    for (method, path, body) in &attempts {
        let (status, body) = call(&server, &bob, method, path, body.clone()).await;
        assert_eq!(status, 404, "{method} {path} as Bob: {body}");
        assert_eq!(body["error"]["code"], "session_not_found", "{body}");
    }
    // Ada reaches it (input first: ending it would refuse the rest).
    for (method, path, body) in &attempts {
        let (status, body) = call(&server, &ada, method, path, body.clone()).await;
        assert!(
            [200, 201, 202, 409].contains(&status),
            "{method} {path} as Ada: {status} {body}"
        );
    }
    // Each lists only their own; a platform key filters by user.
    let bobs = create(&server, &bob, "hello").await;
    let list = |token: String| {
        let server = &server;
        async move { call(server, &token, "GET", "/sessions", Value::Null).await }
    };
    let (status, page) = list(ada.clone()).await;
    assert_eq!(status, 200, "{page}");
    let ids: Vec<&str> = (page["items"].as_array().unwrap().iter())
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [session]);
    let (status, page) = list(bob.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(page["items"][0]["session_id"], bobs["session_id"]);
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
    let (status, body) = call(&server, &bob, "GET", "/sessions?user=ada", Value::Null).await;
    assert_eq!(status, 403, "{body}");
    let (status, page) = server.get("/sessions?user=bob").await;
    assert_eq!(status, 200);
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["items"][0]["end_user"], "bob");
    // The app's bare invocation key reaches no user's session, and lists none.
    let (_, bare) = server.mint_key("invocation", "web", Some("shop")).await;
    let (status, _) = call(
        &server,
        &bare,
        "GET",
        &format!("/sessions/{session}"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = call(&server, &bare, "GET", "/sessions", Value::Null).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn only_listed_claims_reach_the_journal() {
    let (_dir, server) = shop().await;
    let token = server
        .end_user_token_with(
            "shop",
            json!({"user": "ada", "claims": {"email": "ada@example.com", "role": "admin"}}),
        )
        .await;
    let created = create(&server, &token, "hi").await;
    let journal = first_turn(&server, &created).await;
    assert_eq!(journal[0]["type"], "SESSION_CREATED");
    let user = &journal[0]["payload"]["end_user"];
    assert_eq!(
        user,
        &json!({"id": "ada", "claims": {"email": "ada@example.com"}})
    );
    // The same session created with the platform key records no user.
    let (status, plain) = server
        .post(
            "/sessions",
            json!({"app": "shop", "route": "/chat", "input": "hi"}),
        )
        .await;
    assert_eq!(status, 201);
    let journal = first_turn(&server, &plain).await;
    assert!(
        journal[0]["payload"].get("end_user").is_none(),
        "{}",
        journal[0]
    );
}

/// What hello answers to "who am i" in a session created with `token`.
async fn whoami(server: &Server, token: &str) -> Vec<String> {
    let created = create(server, token, "who am i").await;
    let journal = first_turn(server, &created).await;
    assert_eq!(journal.last().unwrap()["type"], "TURN_ENDED", "{journal:?}");
    support::agents::said(&journal)
}

#[tokio::test]
async fn the_agent_knows_the_end_user_it_serves() {
    let (_dir, server) = shop().await;
    // The claims the app lists reach the agent; `plan` is not listed.
    let ada = server
        .end_user_token_with(
            "shop",
            json!({"user": "ada", "claims": {"email": "ada@example.com", "plan": "pro"}}),
        )
        .await;
    assert_eq!(
        whoami(&server, &ada).await,
        ["You are ada (ada@example.com)."]
    );
    let bob = server.end_user_token("shop", "bob").await;
    assert_eq!(whoami(&server, &bob).await, ["You are bob (no email)."]);
    // With the platform key and with the bare invocation key, nobody.
    assert_eq!(whoami(&server, support::KEY).await, ["You are anonymous."]);
    let (_, bare) = server.mint_key("invocation", "web", Some("shop")).await;
    assert_eq!(whoami(&server, &bare).await, ["You are anonymous."]);
}

/// A thread id as a browser makes it (`crypto.randomUUID()`).
fn random_thread() -> String {
    let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
    id.to_string()
}

/// An AG-UI run on `thread`; returns the session its RUN_STARTED names.
async fn run_on(server: &Server, token: &str, thread: &str, text: &str) -> (u16, String) {
    let body = json!({
        "threadId": thread, "runId": "r",
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let response = server
        .client
        .post(server.url("/ag-ui/shop/chat"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    if status != 200 {
        return (status, text);
    }
    let started: Value = (text.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .find(|event| event["type"] == "RUN_STARTED")
        .expect("RUN_STARTED");
    let session = started["metadata"]["agenthost"]["session_id"]
        .as_str()
        .unwrap();
    (status, session.to_string())
}

#[tokio::test]
async fn the_same_thread_or_idempotency_key_from_two_users_is_two_sessions() {
    let (_dir, server) = shop().await;
    let ada = server.end_user_token("shop", "ada").await;
    let bob = server.end_user_token("shop", "bob").await;
    let (status, adas) = run_on(&server, &ada, "order-1234", "my card is 4111").await;
    assert_eq!(status, 200, "{adas}");
    let (status, bobs) = run_on(&server, &bob, "order-1234", "what did I say before?").await;
    assert_eq!(status, 200, "{bobs}");
    assert_ne!(
        adas, bobs,
        "Bob's run on Ada's threadId must not reach her session"
    );
    // Ada's next run on her thread continues her session.
    let (_, again) = run_on(&server, &ada, "order-1234", "and now?").await;
    assert_eq!(again, adas);

    let post = |token: String| {
        let server = &server;
        async move {
            let response = server
                .client
                .post(server.url("/sessions"))
                .bearer_auth(token)
                .header("Idempotency-Key", "1732612345678")
                .json(&json!({"app": "shop", "route": "/chat", "input": "hi"}))
                .send()
                .await
                .unwrap();
            support::status_and_json(response).await
        }
    };
    let (status, first) = post(ada.clone()).await;
    assert_eq!(status, 201, "{first}");
    let (_, replay) = post(ada.clone()).await;
    assert_eq!(
        replay["session_id"], first["session_id"],
        "Ada's retry replays"
    );
    let (status, bobs) = post(bob.clone()).await;
    assert_eq!(status, 201, "{bobs}");
    assert_ne!(
        bobs["session_id"], first["session_id"],
        "Bob gets his own session"
    );
    assert_eq!(bobs["end_user"], "bob");
}

#[tokio::test]
async fn a_bare_invocation_key_must_send_unguessable_names() {
    let (_dir, server) = shop().await;
    let (_, bare) = server.mint_key("invocation", "web", Some("shop")).await;
    let (status, body) = run_on(&server, &bare, "order-1234", "hi").await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("guessable_name"), "{body}");
    let (status, _) = run_on(&server, &bare, &random_thread(), "hi").await;
    assert_eq!(status, 200);
    for (key, expected) in [("1732612345678", 422), ("kq3_Vx9-Lm2PzR8tYw4HbN", 201)] {
        let response = server
            .client
            .post(server.url("/sessions"))
            .bearer_auth(&bare)
            .header("Idempotency-Key", key)
            .json(&json!({"app": "shop", "route": "/chat", "input": "hi"}))
            .send()
            .await
            .unwrap();
        let (status, body) = support::status_and_json(response).await;
        assert_eq!(status, expected, "Idempotency-Key {key}: {body}");
    }
}

#[tokio::test]
async fn required_end_users_refuse_the_bare_invocation_key() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_shop(&server, MANIFEST).await;
    let (_, bare) = server.mint_key("invocation", "web", Some("shop")).await;
    // A session made with the bare key before the app requires end users.
    let (status, old) = try_create(&server, &bare, "hi").await;
    assert_eq!(status, 201, "{old}");
    let old = old["session_id"].as_str().unwrap().to_string();
    deploy_shop(
        &server,
        &MANIFEST.replace("[end_users]\n", "[end_users]\nrequired = true\n"),
    )
    .await;

    let (status, body) = try_create(&server, &bare, "hi").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "end_user_token_required");
    let (status, body) = call(
        &server,
        &bare,
        "GET",
        &format!("/sessions/{old}"),
        Value::Null,
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("end_user_token_required"))
    );
    let (status, body) = run_on(&server, &bare, &random_thread(), "hi").await;
    assert_eq!(status, 401, "{body}");
    // An end user's token works.
    let ada = server.end_user_token("shop", "ada").await;
    create(&server, &ada, "hi").await;
}

#[tokio::test]
async fn forged_and_foreign_tokens_are_refused_with_their_reason() {
    let (_dir, server) = shop().await;
    server.deploy("other", &support::guest("hello")).await;
    let ada = server.end_user_token("shop", "ada").await;
    // Mallory changes the user in the payload and keeps the tag.
    let (prefix_and_body, tag) = ada.rsplit_once('.').unwrap();
    let mut body = prefix_and_body.to_string();
    let last = body.pop().unwrap();
    body.push(if last == 'A' { 'B' } else { 'A' });
    let forged = format!("{body}.{tag}");
    let (status, error) = call(&server, &forged, "GET", "/sessions", Value::Null).await;
    assert_eq!(status, 401, "{error}");
    assert_eq!(error["error"]["code"], "invalid_signature", "{error}");
    let (status, error) = call(&server, "ahu1.x", "GET", "/sessions", Value::Null).await;
    assert_eq!(
        (status, &error["error"]["code"]),
        (401, &json!("malformed_token"))
    );
    // A user of `other` is refused on `shop`, whether or not the app exists.
    let foreign = server.end_user_token("other", "ada").await;
    for app in ["shop", "no-such-app"] {
        let (status, error) = call(
            &server,
            &foreign,
            "POST",
            "/sessions",
            json!({"app": app, "route": "/chat", "input": "hi"}),
        )
        .await;
        assert_eq!(status, 401, "{error}");
        assert_eq!(error["error"]["code"], "token_for_another_app");
    }
    // Platform endpoints stay closed to end users.
    let (status, _) = call(&server, &ada, "GET", "/apps", Value::Null).await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &server,
        &ada,
        "POST",
        "/apps/shop/end-user-tokens",
        json!({"user": "x"}),
    )
    .await;
    assert_eq!(status, 403);
}

/// Deploys the ops example (its `delete_record` is gated in code) as
/// `slug`, with end users and `extra` manifest text.
async fn deploy_ops(server: &Server, slug: &str, extra: &str) {
    let manifest =
        format!("[app]\nslug = \"{slug}\"\n[agent]\nentry = \"ops.wasm\"\n[end_users]\n{extra}");
    let component = support::guest("ops");
    let (status, row) = server
        .upload(bundle(&[("ops.wasm", &component)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
}

/// Ada's session of `app` waiting on a gated `delete_record`.
async fn awaiting(server: &Server, token: &str, app: &str) -> (String, Vec<Value>) {
    let body = json!({"app": app, "route": "/ops", "input": "delete x"});
    let (status, created) = call(server, token, "POST", "/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    let events = read_until(server, &created, "TOOL_APPROVAL_REQUIRED").await;
    (created["session_id"].as_str().unwrap().to_string(), events)
}

#[tokio::test]
async fn an_end_user_decides_only_where_the_tool_says_so_and_only_their_own() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    deploy_ops(
        &server,
        "ops",
        "[tools.delete_record]\napprover = \"end_user\"\n",
    )
    .await;
    deploy_ops(&server, "strict", "").await;
    let ada = server.end_user_token("ops", "ada").await;
    let bob = server.end_user_token("ops", "bob").await;
    let (session, _) = awaiting(&server, &ada, "ops").await;
    let path = format!("/sessions/{session}/approval");

    // Not Bob's, and never the bare key's (every end user holds it).
    let (status, body) = call(&server, &bob, "POST", &path, json!({"approved": true})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("session_not_found"))
    );
    let (_, bare) = server.mint_key("invocation", "web", Some("ops")).await;
    let (status, _) = call(&server, &bare, "POST", &path, json!({"approved": true})).await;
    assert_eq!(status, 403);

    // Ada decides, under her own id whatever `approver` she sends.
    let body = json!({"approved": false, "approver": "the CFO"});
    let (status, body) = call(&server, &ada, "POST", &path, body).await;
    assert_eq!(status, 202, "{body}");
    let minted = format!("/sessions/{session}/stream-token");
    let (_, minted) = call(&server, &ada, "POST", &minted, json!({})).await;
    let token = minted["stream_token"].as_str().unwrap().to_string();
    let url = server.url(&format!("/sessions/{session}/events?token={token}"));
    let response = server.client.get(url).send().await.unwrap();
    let events = support::EventStream::new(response)
        .until(&["TOOL_APPROVAL_DENIED"])
        .await;
    let denied = &events.last().unwrap()["payload"];
    assert_eq!(denied["approver"], "ada", "{denied}");
    assert!(
        denied["key_id"].as_str().unwrap().starts_with("user:"),
        "{denied}"
    );

    // Where the manifest leaves the tool to operators, Ada may not decide.
    let strict = server.end_user_token("strict", "ada").await;
    let (session, _) = awaiting(&server, &strict, "strict").await;
    let path = format!("/sessions/{session}/approval");
    let (status, body) = call(&server, &strict, "POST", &path, json!({"approved": true})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("forbidden")),
        "{body}"
    );
    let (status, body) = server.post(&path, json!({"approved": true})).await;
    assert_eq!(status, 202, "an operator still decides: {body}");
}

#[tokio::test]
async fn an_end_user_has_at_most_their_share_of_open_sessions() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let manifest = MANIFEST.replace(
        "[end_users]\n",
        "[end_users]\nmax_open_sessions_per_user = 2\n",
    );
    deploy_shop(&server, &manifest).await;
    let ada = server.end_user_token("shop", "ada").await;
    let bob = server.end_user_token("shop", "bob").await;
    let first = create(&server, &ada, "one").await;
    create(&server, &ada, "two").await;
    let (status, body) = try_create(&server, &ada, "three").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("quota_exceeded")),
        "{body}"
    );
    // Another user's share is their own.
    create(&server, &bob, "one").await;
    // Ending one of hers gives Ada a place again.
    let session = first["session_id"].as_str().unwrap();
    let (status, body) = call(
        &server,
        &ada,
        "POST",
        &format!("/sessions/{session}/end"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    create(&server, &ada, "three").await;
    // The refusal is counted.
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(r#"cap="open_sessions_per_user""#),
        "{metrics}"
    );
}
