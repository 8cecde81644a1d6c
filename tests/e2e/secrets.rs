//! Secrets: sealed at rest, listed without values, injected at each turn,
//! rotated without a redeploy, redacted from what the agent emits; racing
//! writes leave turns the value that was stored last.

use serde_json::{Value, json};

use crate::support::{self, Server, bundle};

async fn put(server: &Server, name: &str, value: &str) -> (u16, Value) {
    server.put_secret(name, value).await
}

async fn say_env(server: &Server, session: &str) -> Vec<Value> {
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "GREETING"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let mut stream = server.events(session, None).await;
    loop {
        let events = stream.until(&["TURN_ENDED", "TURN_ERROR"]).await;
        let (_, record) = server.get(&format!("/sessions/{session}")).await;
        if events.last().unwrap()["payload"]["turn"] == record["turn"] {
            return events;
        }
    }
}

fn said(events: &[Value]) -> String {
    events
        .iter()
        .rfind(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .map(|e| e["payload"]["text"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn secrets_are_sealed_injected_rotated_redacted_and_deleted() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let (status, body) = put(&server, "bad-name", "x").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_secret_name"))
    );
    let (status, created) = put(&server, "GREETING", "hello-secret-1").await;
    assert_eq!(status, 201, "{created}");
    let (status, listed) = server.get("/secrets").await;
    assert_eq!(status, 200);
    assert_eq!(listed[0]["name"], "GREETING");
    assert!(listed[0]["updated_at"].is_string());
    assert!(
        !listed.to_string().contains("hello-secret"),
        "never the value"
    );

    let manifest =
        "[app]\nslug = \"env\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = [\"GREETING\"]\n";
    let rogue = support::guest("rogue");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &rogue)]), manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");

    // The agent sees the value; the journal sees it only where redaction cannot know it.
    let session = server.session("env", "/env", json!("GREETING")).await;
    let first = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(
        said(&first),
        "len=14 reversed=1-terces-olleh raw=[REDACTED:GREETING]"
    );

    // Rotated: the next turn sees the new value, no redeploy.
    let (status, rotated) = put(&server, "GREETING", "hello-secret-2").await;
    assert_eq!(status, 200);
    assert_eq!(rotated["created_at"], created["created_at"]);
    let events = say_env(&server, &session).await;
    assert_eq!(
        said(&events),
        "len=14 reversed=2-terces-olleh raw=[REDACTED:GREETING]"
    );

    // The database holds no value in the clear.
    let db = support::stored_bytes(dir.path());
    for value in ["hello-secret-1", "hello-secret-2"] {
        assert!(
            !db.windows(value.len()).any(|w| w == value.as_bytes()),
            "{value} in the store"
        );
    }
    // A control that the scan reads the journal's bytes: the reversed value,
    // which redaction cannot know, is in it (a scan that skipped a table or
    // read bytes as hex text would not see it).
    let reversed = b"reversed=1-terces-olleh";
    assert!(
        db.windows(reversed.len()).any(|w| w == reversed),
        "the scan of the store misses the journal"
    );

    // Deleted: a turn of an agent that declares it fails clearly.
    assert_eq!(server.delete("/secrets/GREETING").await, 204);
    assert_eq!(server.delete("/secrets/GREETING").await, 404);
    let events = say_env(&server, &session).await;
    let last = &events.last().unwrap()["payload"];
    assert_eq!(last["kind"], "missing_secret", "{last}");
    assert!(last["message"].as_str().unwrap().contains("GREETING"));

    // Secrets survive a restart (sealed with the master key in the data dir).
    put(&server, "GREETING", "hello-secret-3").await;
    server.kill();
    let server = Server::start(dir.path()).await;
    let events = say_env(&server, &session).await;
    assert_eq!(
        said(&events),
        "len=14 reversed=3-terces-olleh raw=[REDACTED:GREETING]"
    );
}

/// A secret that exists but that the deployment does not declare is not in
/// the agent's environment; a declared one, set beside it, is.
#[tokio::test]
async fn a_secret_the_deployment_does_not_declare_stays_invisible() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    assert_eq!(put(&server, "GREETING", "declared-value-7").await.0, 201);
    assert_eq!(
        put(&server, "UNDECLARED", "undeclared-value-7").await.0,
        201
    );
    let manifest =
        "[app]\nslug = \"env\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = [\"GREETING\"]\n";
    let rogue = support::guest("rogue");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &rogue)]), manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");

    let session = server.session("env", "/env", json!("UNDECLARED")).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    assert_eq!(said(&events), "UNDECLARED is not set", "{events:#?}");
    // The control: the same agent reads the declared one.
    let events = say_env(&server, &session).await;
    assert_eq!(
        said(&events),
        "len=16 reversed=7-eulav-deralced raw=[REDACTED:GREETING]"
    );
}

/// What the `env` app's agent sees of secret `name` in a fresh session.
async fn seen(server: &Server, name: &str) -> String {
    let session = server.session("env", "/env", json!(name)).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED", "TURN_ERROR"])
        .await;
    said(&events)
}

/// Racing `PUT`s of one name commit in some order; the value turns get
/// (the in-memory vault) must be the one that was committed last, the one
/// a restart loads from the store.
#[tokio::test]
async fn racing_writes_of_a_secret_leave_turns_the_stored_value() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let names: Vec<String> = (0..8).map(|i| format!("RACE_{i}")).collect();
    let manifest = format!(
        "[app]\nslug = \"env\"\n[agent]\nentry = \"agent.wasm\"\nsecrets = {}\n",
        json!(names)
    );
    for name in &names {
        let (status, body) = put(&server, name, "initial-value").await;
        assert_eq!(status, 201, "{body}");
    }
    let rogue = support::guest("rogue");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &rogue)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");

    // Eight writes of each name at once: they share commits, and their
    // handlers return together.
    let server_ref = &server;
    let writes = (names.iter()).flat_map(|name| {
        (0..8)
            .map(move |i| async move { put(server_ref, name, &format!("{name}-value-{i}")).await })
    });
    for (status, body) in futures::future::join_all(writes).await {
        assert_eq!(status, 200, "{body}");
    }
    let mut before = Vec::new();
    for name in &names {
        before.push(seen(&server, name).await);
    }
    drop(server);
    let server = Server::start(dir.path()).await;
    for (name, before) in names.iter().zip(before) {
        let stored = seen(&server, name).await;
        assert!(
            stored.contains(&format!("{name}-value-").chars().rev().collect::<String>())
                || stored.contains("reversed="),
            "{stored}"
        );
        assert_eq!(
            before, stored,
            "turns saw another value of {name} than the one stored"
        );
    }
}
