//! Who may do what: the endpoint-to-key matrix over every row of the API's
//! one endpoint table, key lifecycle, rotation and revocation (a revoked
//! key's stream ends during a long replay, not only at the tail).

use std::time::Duration;

use agenthost::{Access, endpoints};
use serde_json::{Value, json};

use crate::support::{self, KEY, Server};

/// The keys of the matrix: (label, key or none).
struct Keys {
    platform: String,
    own: String,
    other: String,
    revoked: String,
    /// End-user tokens of a user of `mine` and of a user of `theirs`.
    own_user: String,
    other_user: String,
}

async fn setup() -> (tempfile::TempDir, Server, Keys, String, String) {
    let (dir, server, keys, (session, _), deployment) = setup_with_spare().await;
    (dir, server, keys, session, deployment)
}

/// `setup`, with a second idle session for the rows that end or delete one.
async fn setup_with_spare() -> (tempfile::TempDir, Server, Keys, (String, String), String) {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let hello = support::guest("hello");
    let mine = server.deploy("mine", &hello).await;
    server.deploy("theirs", &hello).await;
    let (_, own) = server
        .mint_key("invocation", "frontend", Some("mine"))
        .await;
    let (_, other) = server
        .mint_key("invocation", "other frontend", Some("theirs"))
        .await;
    let (doomed, revoked) = server.mint_key("platform", "doomed", None).await;
    assert_eq!(server.delete(&format!("/api-keys/{doomed}")).await, 204);
    let session = server.session("mine", "/chat", json!("hi")).await;
    server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let spare = server.session("mine", "/chat", json!("spare")).await;
    server
        .events(&spare, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let keys = Keys {
        platform: KEY.to_string(),
        own,
        other,
        revoked,
        own_user: server.end_user_token("mine", "ada").await,
        other_user: server.end_user_token("theirs", "bob").await,
    };
    let deployment = mine["id"].as_str().unwrap().to_string();
    (dir, server, keys, (session, spare), deployment)
}

/// A request for `method path`, its `{id}` filled in and a plausible body.
fn request(
    server: &Server,
    method: &str,
    path: &str,
    (session, spare): (&str, &str),
    deployment: &str,
) -> reqwest::RequestBuilder {
    let filled = if path.starts_with("/sessions/") {
        // What ends or deletes a session acts on a spare one, so every
        // other row still finds the shared session as it was.
        let destructive = method == "DELETE" || path.ends_with("/end");
        path.replace("{id}", if destructive { spare } else { session })
    } else if path.starts_with("/apps/") {
        // The user a platform key revokes is none of the matrix's own.
        path.replace("{id}", "mine").replace("{user}", "nobody")
    } else if path.starts_with("/deployments/") {
        path.replace("{id}", deployment)
    } else if path.starts_with("/ag-ui/") {
        path.replace("{app}", "mine").replace("{route}", "chat")
    } else if path.starts_with("/api-keys/") {
        path.replace("{id}", "0000000000000000")
    } else {
        path.replace("{key}", "MATRIX_SECRET")
    };
    let body = match (method, path) {
        ("POST", "/sessions") => json!({"app": "mine", "route": "/chat", "input": "hi"}),
        ("POST", "/sessions/{id}/input") => json!({"input": "again"}),
        ("POST", "/sessions/{id}/approval") => json!({"approved": true}),
        ("POST", "/ag-ui/{app}/{route}") => json!({
            "threadId": "matrix", "runId": "matrix",
            "messages": [{"id": "m", "role": "user", "content": "hi"}],
        }),
        // MCP names no app or session: every credential lists its own tools.
        ("POST", "/mcp") => json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ("POST", "/api-keys") => json!({"class": "platform", "name": "matrix"}),
        ("PUT", _) => json!({"value": "matrix value"}),
        ("PATCH", "/sessions/{id}") => json!({"budget": {"tokens": 1000}}),
        _ => json!({}),
    };
    let url = server.url(&filled);
    let builder = match method {
        "GET" => server.client.get(url),
        "POST" => server.client.post(url),
        "PUT" => server.client.put(url),
        "DELETE" => server.client.delete(url),
        "PATCH" => server.client.patch(url),
        other => panic!("no test for method {other}"),
    };
    if method == "GET" || method == "DELETE" {
        builder
    } else {
        builder.json(&body)
    }
}

#[tokio::test]
async fn every_endpoint_answers_every_kind_of_key_as_the_matrix_says() {
    let (_dir, server, keys, (session, spare), deployment) = setup_with_spare().await;
    let malformed = format!("ahp_{}_{}", "0".repeat(16), "0".repeat(64));
    let mut unauthorized_bodies: Vec<Value> = Vec::new();
    for endpoint in endpoints() {
        let cases: [(&str, Option<&str>); 9] = [
            ("no key", None),
            ("bad key", Some("not-a-key")),
            ("malformed key", Some(&malformed)),
            ("revoked key", Some(&keys.revoked)),
            ("platform key", Some(&keys.platform)),
            ("own-app invocation key", Some(&keys.own)),
            ("other-app invocation key", Some(&keys.other)),
            ("own-app end user", Some(&keys.own_user)),
            ("other-app end user", Some(&keys.other_user)),
        ];
        for (label, key) in cases {
            let mut builder = request(
                &server,
                endpoint.method,
                endpoint.path,
                (&session, &spare),
                &deployment,
            );
            if let Some(key) = key {
                builder = builder.bearer_auth(key);
            }
            let response = builder
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            // Event streams stay open: the status is all we need.
            let body: Value = if response
                .headers()
                .get("content-type")
                .is_some_and(|v| v.to_str().unwrap_or("").starts_with("application/json"))
            {
                response.json().await.unwrap()
            } else {
                Value::Null
            };
            let what = format!(
                "{} {} with {label}: {status} {body}",
                endpoint.method, endpoint.path
            );
            let session_scoped = matches!(endpoint.access, Access::Session | Access::SessionStream);
            // The matrix's sessions belong to no end user.
            let names_session = endpoint.path.starts_with("/sessions/");
            match (endpoint.access, label) {
                // A decision link's credential is its signed token (in
                // the query): without one it names nothing, whatever the key.
                (Access::Public, _) if endpoint.path == "/decision-links" => {
                    assert_eq!(status, 404, "{what}")
                }
                (Access::Public, _) => assert!(status < 400, "{what}"),
                (_, "no key" | "bad key" | "malformed key" | "revoked key") => {
                    assert_eq!(status, 401, "{what}");
                    unauthorized_bodies.push(body);
                }
                // Allowed, so never refused for the key, and never a 5xx
                // (a 4xx the request itself earns, like a 409, is fine).
                (_, "platform key") => {
                    assert!(status < 500 && ![401, 403].contains(&status), "{what}")
                }
                (Access::Platform, _) => {
                    assert_eq!(status, 403, "{what}");
                    assert_eq!(body["error"]["code"], "forbidden", "{what}");
                }
                (Access::EndUser, "own-app invocation key" | "other-app invocation key") => {
                    assert_eq!(status, 403, "{what}: a bare invocation key lists nothing");
                    assert_eq!(body["error"]["code"], "forbidden", "{what}");
                }
                (Access::EndUser, _) if !names_session => assert_eq!(status, 200, "{what}"),
                // Each credential sees its own tools (tests/e2e/mcp_server.rs).
                (_, _) if endpoint.path == "/mcp" => assert_eq!(status, 200, "{what}"),
                (_, "own-app end user" | "other-app end user") if names_session => {
                    assert_eq!(
                        status, 404,
                        "{what}: another's session does not exist for it"
                    )
                }
                (_, "own-app end user") if session_scoped => {
                    assert!(status < 500 && ![401, 403, 404].contains(&status), "{what}")
                }
                (_, "other-app end user") if session_scoped => {
                    assert_eq!(status, 401, "{what}");
                    assert_eq!(body["error"]["code"], "token_for_another_app", "{what}");
                }
                (_, "own-app invocation key") if session_scoped => {
                    assert!(status < 500 && ![401, 403, 404].contains(&status), "{what}")
                }
                (_, "other-app invocation key") if session_scoped => {
                    assert_eq!(
                        status, 404,
                        "{what}: another app's session does not exist for it"
                    )
                }
                _ => unreachable!("{what}"),
            }
        }
    }
    // Unknown, malformed and revoked keys are indistinguishable.
    assert!(
        unauthorized_bodies.windows(2).all(|w| w[0] == w[1]),
        "{unauthorized_bodies:?}"
    );
}

#[tokio::test]
async fn keys_are_minted_listed_without_secrets_and_revoked_at_once() {
    let (_dir, server, keys, session, _) = setup().await;
    let (status, body) = server
        .post("/api-keys", json!({"class": "invocation", "name": "x"}))
        .await;
    assert_eq!(status, 422, "{body}");
    let (status, _) = server
        .post(
            "/api-keys",
            json!({"class": "platform", "name": "x", "app": "mine"}),
        )
        .await;
    assert_eq!(status, 422);
    let (status, _) = server
        .post(
            "/api-keys",
            json!({"class": "invocation", "name": "x", "app": "nope"}),
        )
        .await;
    assert_eq!(status, 404);
    assert!(keys.own.starts_with("ahi_") && keys.revoked.starts_with("ahp_"));

    // Listed with their prefix and last use, never the secret.
    let (status, list) = server.get("/api-keys").await;
    assert_eq!(status, 200);
    let text = list.to_string();
    assert!(!text.contains(&keys.own) && !text.contains(&keys.other));
    let own = list
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "frontend")
        .unwrap()
        .clone();
    assert_eq!(own["class"], "invocation");
    assert!(keys.own.starts_with(own["prefix"].as_str().unwrap()));
    assert!(own["last_used_at"].is_null(), "never used yet");
    // A refused request (an invocation key on a platform endpoint) is no
    // use of the key. The witness is a key used after the refusal: once its
    // use shows, the refusal's would have shown as well.
    let (status, _) = server.get_as(&keys.own, "/apps").await;
    assert_eq!(status, 403);
    let (witness_id, witness) = server.mint_key("platform", "witness", None).await;
    assert_eq!(server.get_as(&witness, "/apps").await.0, 200);
    let last_used = |list: &serde_json::Value, name: &str| {
        (list.as_array().unwrap().iter())
            .find(|k| k["name"] == name)
            .map(|k| k["last_used_at"].clone())
            .unwrap()
    };
    let mut witnessed = false;
    for _ in 0..200 {
        let (_, list) = server.get("/api-keys").await;
        if last_used(&list, "witness").is_string() {
            assert!(
                last_used(&list, "frontend").is_null(),
                "a refused request moved the key's last use: {list}"
            );
            witnessed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(witnessed, "the witness key's use was recorded");
    assert_eq!(server.delete(&format!("/api-keys/{witness_id}")).await, 204);
    let (status, _) = server
        .get_as(&keys.own, &format!("/sessions/{session}"))
        .await;
    assert_eq!(status, 200);
    let mut used = false;
    for _ in 0..100 {
        let (_, list) = server.get("/api-keys").await;
        let frontend = list
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == "frontend")
            .cloned();
        if frontend.is_some_and(|k| k["last_used_at"].is_string()) {
            used = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(used, "the key's use was recorded");

    // Rotation: a new key for the app, the old one revoked; the session stays reachable.
    let (new_id, new_key) = server
        .mint_key("invocation", "frontend v2", Some("mine"))
        .await;
    let mut stream = {
        let response = server
            .client
            .get(server.url(&format!("/sessions/{session}/events")))
            .bearer_auth(&new_key)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        support::EventStream::new(response)
    };
    stream.until(&["TURN_ENDED"]).await;
    let own_id = own["id"].as_str().unwrap();
    assert_eq!(server.delete(&format!("/api-keys/{own_id}")).await, 204);
    let (status, _) = server
        .get_as(&keys.own, &format!("/sessions/{session}"))
        .await;
    assert_eq!(status, 401, "revoked at once");
    let (status, _) = server
        .get_as(&new_key, &format!("/sessions/{session}"))
        .await;
    assert_eq!(status, 200);
    let (status, _) = server
        .post_as(
            &new_key,
            "/sessions",
            json!({"app": "mine", "route": "/chat", "input": "hi"}),
        )
        .await;
    assert_eq!(status, 201);
    // Revoking a key ends its open streams.
    assert_eq!(server.delete(&format!("/api-keys/{new_id}")).await, 204);
    assert!(
        stream.next(Duration::from_secs(10)).await.is_none(),
        "the stream ended"
    );

    // The last platform key cannot be revoked.
    assert_eq!(server.delete("/api-keys/bootstrap").await, 409);
    assert_eq!(server.delete("/api-keys/0000000000000000").await, 404);
}

#[tokio::test]
async fn a_revoked_keys_stream_ends_during_its_replay() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("rogue", &support::guest("rogue")).await;
    // A journal longer than one replay read (512 events) and than the
    // connection's buffers: 30 messages of 16 deltas of 64 KiB.
    let session = server.session("rogue", "/torrent", json!(30)).await;
    let journal = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(journal.last().unwrap()["type"], "TURN_ENDED");
    assert!(journal.len() > 520, "{} events", journal.len());

    let (id, key) = server.mint_key("platform", "watcher", None).await;
    let response = (server.client)
        .get(server.url(&format!("/sessions/{session}/events")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = support::EventStream::new(response);
    // The replay has begun (and waits on this reader) when the key goes.
    assert!(stream.next(Duration::from_secs(60)).await.is_some());
    assert_eq!(server.delete(&format!("/api-keys/{id}")).await, 204);
    let rest = stream.rest_until_end(Duration::from_secs(60)).await;
    assert!(
        1 + rest.len() < journal.len(),
        "the stream replayed all {} events after its key was revoked",
        journal.len()
    );
}

#[tokio::test]
async fn the_default_approver_is_the_deciding_key() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let ops = support::guest("ops");
    server.deploy("ops", &ops).await;
    let (id, key) = server.mint_key("platform", "on-call", None).await;
    let session = server.session("ops", "/ops", json!("delete x")).await;
    let mut stream = server.events(&session, None).await;
    stream.until(&["TOOL_APPROVAL_REQUIRED"]).await;
    let (status, _) = server
        .post_as(
            &key,
            &format!("/sessions/{session}/approval"),
            json!({"approved": false}),
        )
        .await;
    assert_eq!(status, 202);
    let denied = stream.until(&["TOOL_APPROVAL_DENIED"]).await;
    let payload = &denied.last().unwrap()["payload"];
    assert_eq!(
        (payload["approver"].as_str(), payload["key_id"].as_str()),
        (Some("on-call"), Some(id.as_str()))
    );
}

#[tokio::test]
async fn the_keys_command_mints_lists_and_revokes() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("mine", &support::guest("hello")).await;
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
            .arg("keys")
            .args(args)
            .env("AGENTHOST_URL", &server.url)
            .env("AGENTHOST_API_KEY", KEY)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).to_string(),
        )
    };
    let (ok, out) = run(&[
        "create",
        "--class",
        "invocation",
        "--name",
        "cli key",
        "--app",
        "mine",
    ]);
    assert!(ok, "{out}");
    let line = |prefix: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap()
            .trim()
            .to_string()
    };
    let (id, key) = (line("id:"), line("key:"));
    assert!(key.starts_with("ahi_"));
    let (status, _) = server
        .post_as(
            &key,
            "/sessions",
            json!({"app": "mine", "route": "/chat", "input": "hi"}),
        )
        .await;
    assert_eq!(status, 201);
    let (ok, listed) = run(&["list"]);
    assert!(
        ok && listed.contains(&id) && listed.contains("cli key") && !listed.contains(&key),
        "{listed}"
    );
    let (ok, _) = run(&["revoke", &id]);
    assert!(ok);
    let (status, _) = server.get_as(&key, "/apps").await;
    assert_eq!(status, 401);
    let (ok, _) = run(&["revoke", "bootstrap"]);
    assert!(!ok, "the last platform key stays");
}
