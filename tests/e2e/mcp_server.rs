//! agenthost as an MCP server (docs/mcp.md): the official MCP clients, the
//! Python SDK's (`mcp`, tests/mcp/client.py) and the TypeScript SDK's
//! (`@modelcontextprotocol/sdk`, tests/mcp/client.mjs), installed by
//! scripts/prereqs/47-mcp.sh and found through `AGENTHOST_MCP_CLIENTS` and
//! `AGENTHOST_MCP_PYTHON`, connect to `POST /mcp` on `examples/hello` and
//! `examples/ops`: they list the tools, call them and read the progress and
//! the results, a gated call's pending approval included, which is then
//! decided over HTTP and the session goes on; an invocation key sees only
//! its app. Then the endpoint's edges over plain HTTP: credentials, the
//! Origin check, the stream cap, the body limit, JSON-RPC's refusals.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{self, KEY, Server};

fn clients_dir() -> PathBuf {
    match std::env::var_os("AGENTHOST_MCP_CLIENTS") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "AGENTHOST_MCP_CLIENTS is not set: the MCP server tests run the official MCP clients \
             (run scripts/test, or `source scripts/prereqs/47-mcp.sh`, which installs them and \
             exports AGENTHOST_MCP_CLIENTS and AGENTHOST_MCP_PYTHON)"
        ),
    }
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    TypeScript,
}

/// Runs one official client against `url` with `credential`; its report.
async fn run_client(sdk: Sdk, url: &str, credential: &str, mode: &str) -> Value {
    let dir = clients_dir();
    let mut command = match sdk {
        Sdk::Python => {
            let python = std::env::var_os("AGENTHOST_MCP_PYTHON")
                .expect("AGENTHOST_MCP_PYTHON (scripts/prereqs/47-mcp.sh)");
            let mut command = Command::new(python);
            command.arg(dir.join("client.py"));
            command
        }
        Sdk::TypeScript => {
            let mut command = Command::new("node");
            command.arg(dir.join("client.mjs"));
            command
        }
    };
    command.args([url, credential, mode]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("run the client"))
        .await
        .expect("wait for the client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{sdk:?} client failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "{sdk:?} client printed no JSON report: {}\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

async fn hello_and_ops(flags: &[&str], env: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = if env.is_empty() {
        Server::start_with(dir.path(), flags).await
    } else {
        assert!(flags.is_empty());
        Server::start_with_env(dir.path(), env).await
    };
    server.deploy("hello", &support::guest("hello")).await;
    server.deploy("ops", &support::guest("ops")).await;
    (dir, server)
}

fn names(tools: &Value) -> Vec<&str> {
    (tools.as_array().expect("tools").iter())
        .map(|t| t["name"].as_str().expect("a name"))
        .collect()
}

/// One answer of `POST /mcp`: status, content type, and the JSON-RPC
/// messages of its body (one for JSON, each `data:` line for SSE).
async fn mcp(
    server: &Server,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, Vec<Value>) {
    let mut request = (server.client.post(server.url("/mcp")))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("POST /mcp");
    let status = response.status().as_u16();
    let content_type = (response.headers().get("content-type"))
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let text = response.text().await.expect("the body");
    let messages = if content_type.starts_with("text/event-stream") {
        (text.lines())
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| serde_json::from_str(data.trim()).expect("a JSON-RPC message"))
            .collect()
    } else if text.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))]
    };
    (status, content_type, messages)
}

fn call(name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}}})
    .to_string()
}

/// Waits (bounded) until the session's status is `status`.
async fn wait_status(server: &Server, session: &str, status: &str) -> Value {
    for _ in 0..600 {
        let (code, view) = server.get(&format!("/sessions/{session}")).await;
        assert_eq!(code, 200, "{view}");
        if view["status"] == status {
            return view;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("session {session} never became {status}");
}

/// What each SDK's `full` run must show (the same for both).
fn check_full_report(sdk: Sdk, report: &Value) -> String {
    assert_eq!(report["error"], Value::Null, "{sdk:?}: {report:#}");
    assert_eq!(report["protocolVersion"], "2025-11-25", "{sdk:?}");
    assert_eq!(report["server"]["name"], "agenthost", "{sdk:?}");
    let tools = &report["tools"];
    assert_eq!(names(tools), ["hello_chat", "ops_ops"], "{sdk:?}");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(schema["required"], json!(["message"]), "{sdk:?}");
    assert_eq!(schema["properties"]["session_id"]["type"], "string");
    let calls = &report["calls"];

    // The agent's deltas arrived as progress, in order, before the result.
    let hello = &calls["hello"];
    let progress = hello["progress"].as_array().expect("progress");
    let text: String = (progress.iter())
        .map(|p| p["message"].as_str().expect("a delta"))
        .collect();
    assert_eq!(text, "You said: hello there mcp", "{sdk:?}: {hello:#}");
    assert_eq!(progress.len(), 4, "one per delta: {hello:#}");
    let steps: Vec<f64> = (progress.iter())
        .map(|p| p["progress"].as_f64().expect("a number"))
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    let result = &hello["result"];
    assert_eq!(result["isError"], false, "{sdk:?}: {result:#}");
    assert_eq!(result["content"][0]["text"], "You said: hello there mcp");
    let structured = &result["structuredContent"];
    assert_eq!(structured["outcome"], "completed");
    assert_eq!(structured["message"], "You said: hello there mcp");
    assert_eq!(structured["turn"], 1);

    // A session, then the same session continued by `session_id` to a gated call.
    let added = &calls["add"]["result"];
    assert_eq!(
        added["content"][0]["text"], "Added apples. Added pears. Records: apples, pears.",
        "{sdk:?}: {added:#}"
    );
    let session = added["structuredContent"]["session_id"]
        .as_str()
        .expect("a session id")
        .to_string();
    let gated = &calls["gated"]["result"];
    assert_eq!(gated["isError"], false, "{sdk:?}: {gated:#}");
    let pending = &gated["structuredContent"];
    assert_eq!(pending["outcome"], "approval_pending", "{gated:#}");
    assert_eq!(pending["session_id"], session.as_str());
    assert_eq!(pending["turn"], 2);
    let approval = &pending["approval"];
    assert_eq!(approval["tool"], "delete_record");
    assert_eq!(approval["arguments"], json!({"name": "apples"}));
    assert_eq!(approval["reason"], "the user asked to delete apples");
    assert_eq!(
        approval["decide"]["path"],
        format!("/sessions/{session}/approval")
    );
    let text = gated["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("delete_record") && text.contains("/approval"),
        "{text}"
    );

    // A failed turn is an error result, not a protocol error.
    let failed = &calls["failed"]["result"];
    assert_eq!(failed["isError"], true, "{sdk:?}: {:#}", calls["failed"]);
    assert_eq!(failed["structuredContent"]["outcome"], "failed");
    assert_eq!(failed["structuredContent"]["error"]["kind"], "internal");
    session
}

#[tokio::test]
async fn the_official_clients_list_call_and_stream_and_a_decided_approval_goes_on() {
    let (_data, server) = hello_and_ops(&[], &[("AGENTHOST_TEST_PANIC_ON", "kaboom")]).await;
    for sdk in [Sdk::Python, Sdk::TypeScript] {
        let report = run_client(sdk, &server.url, KEY, "full").await;
        let session = check_full_report(sdk, &report);

        // The gated call waits; decided over HTTP, the session goes on.
        wait_status(&server, &session, "awaiting_approval").await;
        let (status, body) = server
            .post(
                &format!("/sessions/{session}/approval"),
                json!({"approved": true, "approver": "alice"}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        wait_status(&server, &session, "idle").await;
        let mut stream = server.events(&session, None).await;
        stream.until(&["TURN_ENDED"]).await;
        // The first turn's end, then the resumed turn's.
        let events = stream.until(&["TURN_ENDED"]).await;
        let ends: Vec<&Value> = (events.iter())
            .filter(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
            .collect();
        assert_eq!(
            ends.last().unwrap()["payload"]["text"],
            "Deleted apples. Records: pears."
        );
        // ... and over MCP, by its session id.
        let (status, kind, messages) = mcp(
            &server,
            Some(KEY),
            &[],
            &call("ops_ops", json!({"message": "list", "session_id": session})),
        )
        .await;
        assert_eq!(status, 200, "{messages:?}");
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        let result = &messages.last().unwrap()["result"];
        assert_eq!(
            result["content"][0]["text"], "Records: pears.",
            "{messages:?}"
        );
        assert_eq!(result["structuredContent"]["turn"], 4);
    }
}

#[tokio::test]
async fn an_invocation_key_and_an_end_user_see_and_call_only_their_app() {
    let (_data, server) = hello_and_ops(&[], &[]).await;
    let (_, ops_key) = server.mint_key("invocation", "ops-web", Some("ops")).await;
    for sdk in [Sdk::Python, Sdk::TypeScript] {
        let report = run_client(sdk, &server.url, &ops_key, "scoped").await;
        assert_eq!(report["error"], Value::Null, "{sdk:?}: {report:#}");
        assert_eq!(names(&report["tools"]), ["ops_ops"], "{sdk:?}");
        // Another app's tool does not exist for this key.
        let other = &report["calls"]["other"];
        assert!(
            other["error"]
                .as_str()
                .is_some_and(|e| e.contains("unknown tool `hello_chat`")),
            "{sdk:?}: {other:#}"
        );
    }
    // The same over plain HTTP, for an end user of the app too: a listed
    // tool runs, another app's is refused before anything is written.
    let ada = server.end_user_token("ops", "ada").await;
    for credential in [ops_key.as_str(), ada.as_str()] {
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        let (status, _, messages) = mcp(&server, Some(credential), &[], &list).await;
        assert_eq!(status, 200, "{messages:?}");
        assert_eq!(names(&messages[0]["result"]["tools"]), ["ops_ops"]);
        let (status, _, messages) = mcp(
            &server,
            Some(credential),
            &[],
            &call("hello_chat", json!({"message": "hi"})),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(messages[0]["error"]["code"], -32602, "{messages:?}");
        let (status, _, messages) = mcp(
            &server,
            Some(credential),
            &[],
            &call("ops_ops", json!({"message": "list"})),
        )
        .await;
        assert_eq!(status, 200);
        let result = &messages.last().unwrap()["result"];
        assert_eq!(
            result["content"][0]["text"], "Records: none.",
            "{messages:?}"
        );
    }
    // A session of the app that is not the end user's is no session for
    // them (a bare invocation key reaches its app's sessions, as over HTTP).
    let theirs = server.session("ops", "/ops", json!("list")).await;
    wait_status(&server, &theirs, "idle").await;
    let (_, _, messages) = mcp(
        &server,
        Some(&ada),
        &[],
        &call("ops_ops", json!({"message": "list", "session_id": theirs})),
    )
    .await;
    assert_eq!(messages[0]["error"]["code"], -32602, "{messages:?}");
    let (_, body) = server.get("/sessions?app=hello").await;
    assert_eq!(body["items"], json!([]), "no hello session was created");
}

#[tokio::test]
async fn credentials_and_origins_are_checked_before_anything_else() {
    let (_data, server) = hello_and_ops(&["--cors-origin", "https://app.example"], &[]).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let (status, _, body) = mcp(&server, None, &[], &init).await;
    assert_eq!(status, 401, "{body:?}");
    let (status, _, body) = mcp(&server, Some("ak_not-a-key"), &[], &init).await;
    assert_eq!(status, 401, "{body:?}");
    // The official clients are refused too.
    for sdk in [Sdk::Python, Sdk::TypeScript] {
        let report = run_client(sdk, &server.url, "ak_not-a-key", "list").await;
        // (The Python client reports no status: `Server returned an error response`.)
        assert!(report["error"].is_string(), "{sdk:?}: {report:#}");
        assert_eq!(report["tools"], Value::Null, "{sdk:?}");
    }
    // A browser page of another origin (DNS rebinding) is refused, with a
    // valid key, before the key is even looked at.
    for key in [Some(KEY), None] {
        let (status, _, body) = mcp(
            &server,
            key,
            &[("origin", "http://rebound.example:8080")],
            &init,
        )
        .await;
        assert_eq!(status, 403, "{body:?}");
        assert_eq!(body[0]["error"]["code"], "origin_not_allowed", "{body:?}");
    }
    let (status, _, body) = mcp(
        &server,
        Some(KEY),
        &[("origin", "https://app.example")],
        &init,
    )
    .await;
    assert_eq!(status, 200, "an allowed origin: {body:?}");
    assert_eq!(body[0]["result"]["protocolVersion"], "2025-06-18");
    // A browser MCP client of that origin passes CORS's preflight.
    let preflight = (server.client)
        .request(reqwest::Method::OPTIONS, server.url("/mcp"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, mcp-protocol-version",
        )
        .send()
        .await
        .unwrap();
    let allowed = (preflight.headers().get("access-control-allow-headers"))
        .map(|v| v.to_str().unwrap_or_default().to_ascii_lowercase())
        .unwrap_or_default();
    assert!(allowed.contains("mcp-protocol-version"), "{allowed}");
    assert!(body[0]["result"]["capabilities"]["tools"].is_object());
}

#[tokio::test]
async fn the_transports_refusals_and_bounds() {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--max-streams-per-key", "1"]).await;
    server.deploy("ops", &support::guest("ops")).await;
    let rpc = |method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": "x", "method": method, "params": params}).to_string()
    };
    // No SSE stream of its own (stateless): GET is 405.
    let response = (server.client.get(server.url("/mcp")))
        .bearer_auth(KEY)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);
    // Notifications and responses: 202, no body; no session id is handed out.
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let (status, _, body) = mcp(&server, Some(KEY), &[], &note).await;
    assert_eq!((status, body.len()), (202, 0));
    let (status, _, body) = mcp(&server, Some(KEY), &[], &rpc("ping", json!({}))).await;
    assert_eq!((status, &body[0]["result"]), (200, &json!({})));
    assert_eq!(body[0]["id"], "x");
    let (_, _, body) = mcp(&server, Some(KEY), &[], &rpc("resources/list", json!({}))).await;
    assert_eq!(body[0]["error"]["code"], -32601, "{body:?}");
    // Not JSON-RPC, a batch, an unknown protocol revision: 400.
    for bad in ["{", "[]", r#"{"jsonrpc":"2.0","id":1}"#] {
        let (status, _, body) = mcp(&server, Some(KEY), &[], bad).await;
        assert_eq!(status, 400, "{bad}: {body:?}");
    }
    let (status, _, _) = mcp(
        &server,
        Some(KEY),
        &[("mcp-protocol-version", "1999-01-01")],
        &rpc("ping", json!({})),
    )
    .await;
    assert_eq!(status, 400);
    // Bad calls are invalid params, and start nothing.
    for arguments in [
        json!({}),
        json!({"message": 7}),
        json!({"message": "x", "extra": 1}),
        json!({"message": "x", "session_id": "nope"}),
        json!({"message": "a\u{0}b"}),
    ] {
        let (status, _, body) =
            mcp(&server, Some(KEY), &[], &call("ops_ops", arguments.clone())).await;
        assert_eq!(status, 200);
        assert_eq!(body[0]["error"]["code"], -32602, "{arguments}: {body:?}");
    }
    let (_, list) = server.get("/sessions").await;
    assert_eq!(list["items"], json!([]), "nothing started");
    // The body limit of the JSON endpoints (1 MiB).
    let huge = call("ops_ops", json!({"message": "x".repeat(1 << 20)}));
    let (status, _, _) = mcp(&server, Some(KEY), &[], &huge).await;
    assert_eq!(status, 413);
    // A call on a session that cannot take input is an error result.
    let (_, _, body) = mcp(
        &server,
        Some(KEY),
        &[],
        &call("ops_ops", json!({"message": "delete pears"})),
    )
    .await;
    let pending = &body.last().unwrap()["result"]["structuredContent"];
    assert_eq!(pending["outcome"], "approval_pending", "{body:?}");
    let session = pending["session_id"].as_str().unwrap();
    let again = call("ops_ops", json!({"message": "list", "session_id": session}));
    let (_, _, body) = mcp(&server, Some(KEY), &[], &again).await;
    let refused = &body[0]["result"];
    assert_eq!(refused["isError"], true, "{body:?}");
    assert_eq!(refused["structuredContent"]["outcome"], "refused");
    // An MCP answer holds a place under the key's stream cap (1 here):
    // with an event stream open, /mcp is refused until it closes.
    let stream = server.events(session, None).await;
    let (status, _, body) = mcp(&server, Some(KEY), &[], &rpc("ping", json!({}))).await;
    assert_eq!(status, 429, "{body:?}");
    assert_eq!(body[0]["error"]["code"], "too_many_streams");
    drop(stream);
    let mut status = 0;
    for _ in 0..100 {
        (status, _, _) = mcp(&server, Some(KEY), &[], &rpc("ping", json!({}))).await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200, "the place is given back");
}

#[tokio::test]
async fn the_manifest_describes_a_routes_tool_and_its_arguments_are_the_input() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let manifest = r#"[app]
slug = "hello"
[agent]
entry = "agent.wasm"
[routes."/chat"]
description = "Says back what it is told."
input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
"#;
    let bundle = support::bundle(&[("agent.wasm", &support::guest("hello"))]);
    let (status, row) = server.upload(bundle, manifest).await;
    assert_eq!(status, 202, "{row}");
    server.wait_built(&row).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (_, _, messages) = mcp(&server, Some(KEY), &[], &list).await;
    let tool = &messages[0]["result"]["tools"][0];
    assert_eq!(tool["name"], "hello_chat");
    assert_eq!(tool["description"], "Says back what it is told.");
    let schema = &tool["inputSchema"];
    assert_eq!(schema["required"], json!(["city"]));
    assert_eq!(schema["properties"]["city"]["type"], "string");
    assert_eq!(
        schema["properties"]["session_id"]["type"], "string",
        "{schema}"
    );
    // The arguments, without session_id, are the turn's input.
    let (_, _, messages) = mcp(
        &server,
        Some(KEY),
        &[],
        &call("hello_chat", json!({"city": "Paris"})),
    )
    .await;
    let result = &messages.last().unwrap()["result"];
    let session = result["structuredContent"]["session_id"].as_str().unwrap();
    let mut stream = server.events(session, None).await;
    let events = stream.until(&["TURN_STARTED"]).await;
    assert_eq!(
        events.last().unwrap()["payload"]["input"],
        json!({"city": "Paris"})
    );
    // (hello takes only text: its turn fails, and says so.)
    assert_eq!(result["isError"], true, "{result}");
}
