//! MCP servers for our agents (the client side of issue 34): a real MCP
//! server built with the official Python SDK (`tests/mcp/server.py`,
//! `MCPServer` over Streamable HTTP on 127.0.0.1, with a bearer check) and
//! agents whose manifest declares it as `[mcp.tools]`. The Rust assistant
//! (`examples/assistant`, driven by the fake OpenAI-compatible server) and
//! the Python and TypeScript agents (`tests/agents/mcp-*`) call its tools
//! through their model loop; the `mcp-direct` fixture calls them without a
//! model, for the outbound policy's refusals. Gated calls approved and
//! denied (once), the bearer secret sent but never journaled, a hanging
//! server timed out with an error the model sees; every tool gated unless
//! the manifest trusts the server's annotations or lists it `ungated` (a
//! destructive tool the server calls read-only waits for a decision); a
//! server that cannot list its tools fails the call at once; a credential
//! in the URL's path (`{secret:NAME}`) never journaled.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::agents::{TERMINAL, of_type, said, turn};
use crate::support::fake_openai::{FakeOpenAi, Reply};
use crate::support::{self, EventStream, Server, bundle, types};

/// The bearer token the MCP server expects (set as secret `MCP_TOKEN`).
pub const TOKEN: &str = "mcp-bearer-0f9e8d7c6b5a";

/// A running `tests/mcp/server.py`; killed when dropped.
pub struct McpServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl McpServer {
    /// Starts the server expecting `token`, answering with SSE (or JSON).
    pub fn start(token: &str, json_answers: bool) -> McpServer {
        McpServer::start_with(token, if json_answers { &["--json"] } else { &[] })
    }

    /// Starts the server expecting `token`, with server.py's `flags`.
    pub fn start_with(token: &str, flags: &[&str]) -> McpServer {
        let python = std::env::var("AGENTHOST_MCP_PYTHON")
            .expect("AGENTHOST_MCP_PYTHON: source scripts/prereqs/47-mcp.sh");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.jsonl");
        let script = support::workspace().join("tests/mcp/server.py");
        let mut command = Command::new(python);
        command.arg(script).arg(token).arg(&log).args(flags);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tests/mcp/server.py");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("server.py said {line:?}"));
        McpServer {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `[mcp.tools]` section for this server, plus `extra` lines.
    pub fn section(&self, extra: &str) -> String {
        format!(
            "[mcp.tools]\nurl = \"{}/mcp\"\nbearer_secret = \"MCP_TOKEN\"\n{extra}",
            self.origin()
        )
    }

    /// The names of the tools called so far, in order.
    pub fn calls(&self) -> Vec<String> {
        calls_in(&self.log)
    }
}

fn calls_in(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    (text.lines())
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["tool"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The assistant (Rust, `ChatLoop`) deployed with `[mcp.tools]`.
struct Setup {
    dir: tempfile::TempDir,
    server: Server,
    fake: FakeOpenAi,
    mcp: McpServer,
}

async fn setup(replies: Vec<Reply>, mcp_extra: &str) -> Setup {
    let mcp = McpServer::start(TOKEN, false);
    let fake = FakeOpenAi::start(replies).await;
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    for (name, value) in [
        ("OPENAI_BASE_URL", fake.base_url()),
        ("OPENAI_API_KEY", "sk-fake".to_string()),
        ("OPENAI_MODEL", "gpt-fake".to_string()),
        ("MCP_TOKEN", TOKEN.to_string()),
    ] {
        let (status, body) = server.put_secret(name, &value).await;
        assert_eq!(status, 201, "PUT /secrets/{name}: {body}");
    }
    let manifest = format!(
        "[app]\nslug = \"assistant\"\n[agent]\nentry = \"assistant.wasm\"\n\
         secrets = [\"OPENAI_BASE_URL\", \"OPENAI_API_KEY\", \"OPENAI_MODEL\"]\n\
         [outbound]\nallow = [\"{}\", \"{}\"]\n{}",
        fake.origin(),
        mcp.origin(),
        // These tests call read-only tools ungated: the server is trusted.
        mcp.section(&format!("trust_annotations = true\n{mcp_extra}"))
    );
    let component = support::guest("assistant");
    server
        .deploy_files(&[("assistant.wasm", &component)], &manifest)
        .await;
    Setup {
        dir,
        server,
        fake,
        mcp,
    }
}

impl Setup {
    async fn chat(&self, input: &str) -> (String, EventStream) {
        let session = (self.server)
            .session("assistant", "/chat", json!(input))
            .await;
        let stream = self.server.events(&session, None).await;
        (session, stream)
    }

    /// The tool names offered in the fake's `n`th request.
    fn offered(&self, n: usize) -> Vec<String> {
        let received = self.fake.received();
        (received[n].body["tools"].as_array().unwrap().iter())
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The tool messages of the fake's `n`th request.
    fn tool_messages(&self, n: usize) -> Vec<String> {
        let received = self.fake.received();
        (received[n].body["messages"].as_array().unwrap().iter())
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

fn payload_of<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found = events.iter().find(|e| e["type"] == kind);
    &found.unwrap_or_else(|| panic!("no {kind} in {:?}", types(events)))["payload"]
}

/// The MCP requests were journaled as outbound HTTP (path only, never headers).
fn assert_mcp_http_journaled(events: &[Value], origin: &str) {
    let sent: Vec<_> = (of_type(events, "HTTP_REQUEST").into_iter())
        .filter(|e| e["payload"]["origin"] == origin)
        .collect();
    assert!(!sent.is_empty(), "{:?}", types(events));
    for request in sent {
        assert_eq!(request["payload"]["path"], "/mcp", "{request}");
        assert_eq!(request["payload"]["method"], "POST", "{request}");
    }
}

#[tokio::test]
async fn a_rust_agent_calls_an_mcp_tool_through_its_model_loop() {
    let s = setup(
        vec![
            Reply::tool_calls("", &[("tools__weather", r#"{"city":"Paris"}"#)]),
            Reply::text(&["It is sunny in Paris."]),
        ],
        "",
    )
    .await;
    let (_, mut stream) = s.chat("Weather in Paris?").await;
    let events = turn(&mut stream).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    // Offered beside the agent's own tools.
    let offered = s.offered(0);
    for name in ["lookup_order", "tools__weather", "tools__delete_file"] {
        assert!(offered.contains(&name.to_string()), "{offered:?}");
    }
    let call = payload_of(&events, "TOOL_CALL");
    assert_eq!(call["name"], "tools__weather");
    assert_eq!(call["mcp_server"], "tools");
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["output"]["content"][0]["text"], "sunny in Paris");
    // The model saw the result.
    let seen = s.tool_messages(1);
    assert!(
        seen.iter().any(|m| m.contains("sunny in Paris")),
        "{seen:?}"
    );
    assert_eq!(said(&events), ["It is sunny in Paris."]);
    assert_eq!(s.mcp.calls(), ["weather"]);
    assert_mcp_http_journaled(&events, &s.mcp.origin());
}

#[tokio::test]
async fn the_bearer_secret_reaches_the_mcp_server_and_never_the_journal() {
    let s = setup(
        vec![
            Reply::tool_calls("", &[("tools__whoami", "{}")]),
            Reply::text(&["Done."]),
        ],
        "",
    )
    .await;
    let (session, mut stream) = s.chat("Who are you?").await;
    let events = turn(&mut stream).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    // The server answers 401 without the bearer: an `ok` result means it was sent.
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(
        result["output"]["content"][0]["text"],
        "the token is [REDACTED:MCP_TOKEN]"
    );
    // The whole journal, read again from its start, and the store's bytes.
    let all = (s.server.events(&session, None).await)
        .until(&["TURN_ENDED"])
        .await;
    let journal = serde_json::to_string(&all).unwrap();
    assert!(!journal.contains(TOKEN), "{journal}");
    assert!(
        journal.contains("[REDACTED:MCP_TOKEN]"),
        "a control: {journal}"
    );
    let stored = support::stored_bytes(s.dir.path());
    assert!(!stored.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()));
    // Nor did the model see it.
    let seen = s.tool_messages(1).join("\n");
    assert!(
        !seen.contains(TOKEN) && seen.contains("[REDACTED:MCP_TOKEN]"),
        "{seen}"
    );
}

/// A session whose model asks for `tools__delete_file`: suspended on it.
async fn suspended_on_delete(s: &Setup) -> (String, EventStream) {
    let (session, mut stream) = s.chat("Delete /tmp/x").await;
    let events = turn(&mut stream).await;
    let required = events.last().unwrap();
    assert_eq!(required["type"], "TOOL_APPROVAL_REQUIRED", "{events:?}");
    assert_eq!(required["payload"]["name"], "tools__delete_file");
    assert_eq!(required["payload"]["gated_by"], json!(["manifest"]));
    assert!(s.mcp.calls().is_empty(), "not sent before the decision");
    (session, stream)
}

async fn decide(server: &Server, session: &str, decision: Value) -> (u16, Value) {
    (server.post(&format!("/sessions/{session}/approval"), decision)).await
}

#[tokio::test]
async fn a_gated_mcp_call_is_approved_once_and_runs_once() {
    let s = setup(
        vec![
            Reply::tool_calls("", &[("tools__delete_file", r#"{"path":"/tmp/x"}"#)]),
            Reply::text(&["Deleted."]),
        ],
        "",
    )
    .await;
    // Not annotated read-only: gated by default.
    let (session, mut stream) = suspended_on_delete(&s).await;
    let (status, body) = decide(&s.server, &session, json!({"approved": true})).await;
    assert_eq!(status, 202, "{body}");
    let resumed = turn(&mut stream).await;
    assert_eq!(resumed.last().unwrap()["type"], "TURN_ENDED", "{resumed:?}");
    let results = of_type(&resumed, "TOOL_RESULT");
    assert_eq!(results.len(), 1, "{resumed:?}");
    assert_eq!(results[0]["payload"]["status"], "ok");
    assert_eq!(
        results[0]["payload"]["output"]["content"][0]["text"],
        "deleted /tmp/x"
    );
    assert_eq!(s.mcp.calls(), ["delete_file"]);
    // Decided once: a second decision is refused and nothing runs again.
    let (status, body) = decide(&s.server, &session, json!({"approved": true})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(s.mcp.calls(), ["delete_file"]);
}

#[tokio::test]
async fn a_denied_mcp_call_never_reaches_the_server() {
    let s = setup(
        vec![
            Reply::tool_calls("", &[("tools__delete_file", r#"{"path":"/tmp/x"}"#)]),
            Reply::text(&["I may not."]),
        ],
        "",
    )
    .await;
    let (session, mut stream) = suspended_on_delete(&s).await;
    let decision = json!({"approved": false, "message": "keep it"});
    let (status, body) = decide(&s.server, &session, decision).await;
    assert_eq!(status, 202, "{body}");
    let resumed = turn(&mut stream).await;
    assert_eq!(resumed.last().unwrap()["type"], "TURN_ENDED", "{resumed:?}");
    let result = payload_of(&resumed, "TOOL_RESULT");
    assert_eq!(result["status"], "denied", "{result}");
    assert!(
        result["output"].as_str().unwrap().ends_with(": keep it"),
        "{result}"
    );
    let seen = s.tool_messages(1).join("\n");
    assert!(
        seen.contains("keep it"),
        "the model sees the denial: {seen}"
    );
    assert!(s.mcp.calls().is_empty(), "{:?}", s.mcp.calls());
    let (status, _) = decide(&s.server, &session, json!({"approved": true})).await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn a_hanging_mcp_server_ends_the_call_not_the_turn() {
    let s = setup(
        vec![
            Reply::tool_calls("", &[("tools__hang", "{}")]),
            Reply::text(&["The tool timed out."]),
        ],
        "timeout_secs = 2\n",
    )
    .await;
    let (_, mut stream) = s.chat("Wait for it").await;
    let events = turn(&mut stream).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error", "{result}");
    let why = result["output"].as_str().unwrap();
    assert!(why.contains("did not answer within 2 s"), "{why}");
    let seen = s.tool_messages(1).join("\n");
    assert!(seen.contains("did not answer within 2 s"), "{seen}");
    assert_eq!(s.mcp.calls(), ["hang"]);
    // The abandoned request has its HTTP_RESPONSE, with an error.
    let responses = of_type(&events, "HTTP_RESPONSE");
    assert!(
        responses.iter().any(|r| r["payload"]["error"].is_string()),
        "{responses:?}"
    );
}

/// `mcp-direct` deployed with `[mcp.tools]` (`approval = "none"`) on a
/// server started with `flags`.
async fn direct(flags: &[&str], mcp: &McpServer, token: &str) -> (tempfile::TempDir, Server) {
    direct_with(flags, mcp, token, &mcp.section("approval = \"none\"\n")).await
}

/// `mcp-direct` deployed with the MCP `section` on a server started with `flags`.
async fn direct_with(
    flags: &[&str],
    mcp: &McpServer,
    token: &str,
    section: &str,
) -> (tempfile::TempDir, Server) {
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), flags).await;
    let (status, body) = server.put_secret("MCP_TOKEN", token).await;
    assert_eq!(status, 201, "{body}");
    deploy_direct(&server, mcp, section).await;
    (dir, server)
}

/// Deploys `mcp-direct` as app `direct` (a new version if it exists) with
/// the MCP `section`.
async fn deploy_direct(server: &Server, mcp: &McpServer, section: &str) {
    let manifest = format!(
        "[app]\nslug = \"direct\"\n[agent]\nentry = \"agent.wasm\"\n[outbound]\nallow = [\"{}\"]\n{section}",
        mcp.origin(),
    );
    let component = support::guest("mcp-direct");
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", &component)]), &manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "active");
}

/// Runs one `/call` of `tool`; returns the turn's events.
async fn call(server: &Server, tool: &str) -> Vec<Value> {
    call_with(server, tool, json!({"city": "Oslo"})).await
}

async fn call_with(server: &Server, tool: &str, arguments: Value) -> Vec<Value> {
    let input = json!({"tool": tool, "arguments": arguments});
    let session = server.session("direct", "/call", input).await;
    (server.events(&session, None).await).until(TERMINAL).await
}

#[tokio::test]
async fn mcp_calls_obey_the_outbound_policy_and_the_bearer_check() {
    let mcp = McpServer::start(TOKEN, true);
    // The operator's ceiling leaves the MCP server's origin out.
    let flags = [
        "--outbound-allow-private",
        "--outbound-allow",
        "https://*.example.com",
    ];
    let (_dir, server) = direct(&flags, &mcp, TOKEN).await;
    let events = call(&server, "tools__weather").await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("refused"),
        "{result}"
    );
    let denied = payload_of(&events, "HTTP_REQUEST_DENIED");
    assert!(
        denied["reason"].as_str().unwrap().contains("allowlist"),
        "{denied}"
    );
    assert!(mcp.calls().is_empty());
    drop(server);

    // Loopback without --outbound-allow-private: a private address.
    let (_dir, server) = direct(&[], &mcp, TOKEN).await;
    let events = call(&server, "tools__weather").await;
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("private"),
        "{result}"
    );
    let denied = payload_of(&events, "HTTP_REQUEST_DENIED");
    assert!(
        denied["reason"]
            .as_str()
            .unwrap()
            .contains("--outbound-allow-private"),
        "{denied}"
    );
    assert!(mcp.calls().is_empty());
    drop(server);

    // Allowed, but with the wrong bearer: the server refuses (JSON answers here).
    let (_dir, server) = direct(&["--outbound-allow-private"], &mcp, "not-the-token").await;
    let events = call(&server, "tools__weather").await;
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("HTTP 401"),
        "{result}"
    );
    assert!(mcp.calls().is_empty());
    drop(server);

    // And with the right one, JSON answers work as SSE ones do.
    let (_dir, server) = direct(&["--outbound-allow-private"], &mcp, TOKEN).await;
    let events = call(&server, "tools__weather").await;
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(said(&events).len(), 1, "{events:?}");
    assert_eq!(mcp.calls(), ["weather"]);
    // The listing, and the bearer secret that never enters the agent.
    let session = server.session("direct", "/list", json!(null)).await;
    let events = (server.events(&session, None).await).until(TERMINAL).await;
    assert_eq!(
        said(&events),
        [
            "tools=tools__weather,tools__delete_file,tools__whoami,tools__hang,tools__big,tools__wipe_database"
        ]
    );
    let session = server.session("direct", "/env", json!(null)).await;
    let events = (server.events(&session, None).await).until(TERMINAL).await;
    assert_eq!(said(&events), ["env=false"]);
    // A URL outside the manifest's own allowlist is refused at upload.
    let manifest = "[app]\nslug = \"other\"\n[agent]\nentry = \"agent.wasm\"\n[mcp.x]\nurl = \"https://mcp.example.com/mcp\"\n";
    let (status, body) = server
        .upload(bundle(&[("agent.wasm", b"")]), manifest)
        .await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("is not in `[outbound] allow`"),
        "{message}"
    );
}

/// An SDK's assistant example (`language`, built as `component`) with
/// `[mcp.tools]`: its model loop calls a read-only tool at once, and a
/// gated one after a human approves it (decided once, run once).
async fn an_sdk_agent_calls_mcp_tools(language: &str, slug: &str, component: &[u8]) {
    let mcp = McpServer::start(TOKEN, false);
    let fake = FakeOpenAi::start(vec![
        Reply::tool_calls("", &[("tools__weather", r#"{"city":"Lima"}"#)]),
        Reply::text(&["Sunny."]),
        Reply::tool_calls("", &[("tools__delete_file", r#"{"path":"/tmp/y"}"#)]),
        Reply::text(&["Deleted."]),
    ])
    .await;
    let dir = support::data_dir();
    let server = crate::support::agents::server(dir.path(), &["--outbound-allow-private"]).await;
    for (name, value) in [
        ("OPENAI_BASE_URL", fake.base_url()),
        ("OPENAI_API_KEY", "sk-fake".to_string()),
        ("OPENAI_MODEL", "gpt-fake".to_string()),
        ("MCP_TOKEN", TOKEN.to_string()),
    ] {
        let (status, body) = server.put_secret(name, &value).await;
        assert_eq!(status, 201, "PUT /secrets/{name}: {body}");
    }
    let extra = format!(
        "secrets = [\"OPENAI_BASE_URL\", \"OPENAI_API_KEY\", \"OPENAI_MODEL\"]\n\
         [outbound]\nallow = [\"{}\", \"{}\"]\n{}",
        fake.origin(),
        mcp.origin(),
        mcp.section("trust_annotations = true\n")
    );
    let manifest = crate::support::agents::manifest(slug, language, &extra);
    crate::support::agents::deploy(&server, component, &manifest).await;

    let session = server
        .session(slug, "/chat", json!("Weather in Lima?"))
        .await;
    let events = turn(&mut server.events(&session, None).await).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    let offered: Vec<String> = (fake.received()[0].body["tools"].as_array().unwrap().iter())
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        offered.contains(&"tools__weather".to_string()),
        "{offered:?}"
    );
    assert!(offered.contains(&"lookup_order".to_string()), "{offered:?}");
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["output"]["content"][0]["text"], "sunny in Lima");
    assert_eq!(payload_of(&events, "TOOL_CALL")["mcp_server"], "tools");
    assert_eq!(mcp.calls(), ["weather"]);

    let session = server.session(slug, "/chat", json!("Delete /tmp/y")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    let required = events.last().unwrap();
    assert_eq!(required["type"], "TOOL_APPROVAL_REQUIRED", "{events:?}");
    assert_eq!(required["payload"]["name"], "tools__delete_file");
    assert_eq!(mcp.calls(), ["weather"], "not sent before the decision");
    let (status, body) = decide(&server, &session, json!({"approved": true})).await;
    assert_eq!(status, 202, "{body}");
    let resumed = turn(&mut stream).await;
    assert_eq!(resumed.last().unwrap()["type"], "TURN_ENDED", "{resumed:?}");
    let result = payload_of(&resumed, "TOOL_RESULT");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["output"]["content"][0]["text"], "deleted /tmp/y");
    let (status, _) = decide(&server, &session, json!({"approved": true})).await;
    assert_eq!(status, 409);
    assert_eq!(mcp.calls(), ["weather", "delete_file"]);
    let all = serde_json::to_string(&events).unwrap() + &serde_json::to_string(&resumed).unwrap();
    assert!(!all.contains(TOKEN));
}

#[tokio::test]
async fn a_python_agent_calls_mcp_tools_through_its_model_loop() {
    let component = crate::python::python_guest("examples/python/assistant");
    an_sdk_agent_calls_mcp_tools("python", "assistant-py", &component).await;
}

#[tokio::test]
async fn a_typescript_agent_calls_mcp_tools_through_its_model_loop() {
    let component = crate::typescript::typescript_guest("examples/typescript/assistant");
    an_sdk_agent_calls_mcp_tools("typescript", "assistant-ts", &component).await;
}

#[tokio::test]
async fn what_an_mcp_server_sends_is_bounded() {
    let mcp = McpServer::start_with(TOKEN, &["--many"]);
    let (_dir, server) = direct(&["--outbound-allow-private"], &mcp, TOKEN).await;
    // 206 tools listed: the host keeps 128.
    let session = server.session("direct", "/list", json!(null)).await;
    let events = (server.events(&session, None).await).until(TERMINAL).await;
    let said = said(&events);
    let names = said[0].strip_prefix("tools=").unwrap().split(',').count();
    assert_eq!(names, 128, "{said:?}");
    // A result over 256 KiB is not kept; the turn goes on.
    let events = call_with(&server, "tools__big", json!({"n": 300_000})).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error");
    let why = result["output"].as_str().unwrap();
    assert!(why.contains("larger than 262144 bytes"), "{why}");
    // An answer over 1 MiB is not read to its end.
    let events = call_with(&server, "tools__big", json!({"n": 600_000})).await;
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error");
    let why = result["output"].as_str().unwrap();
    assert!(
        why.contains("an answer is larger than 1048576 bytes"),
        "{why}"
    );
    // Below both, the result is whole.
    let events = call_with(&server, "tools__big", json!({"n": 1000})).await;
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "ok");
    let text = result["output"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text.len(), 1000);
}

#[tokio::test]
async fn a_cancel_ends_a_turn_waiting_on_an_mcp_server() {
    let mcp = McpServer::start(TOKEN, false);
    let (_dir, server) = direct(&["--outbound-allow-private"], &mcp, TOKEN).await;
    let input = json!({"tool": "tools__hang", "arguments": {}});
    let session = server.session("direct", "/call", input).await;
    let mut stream = server.events(&session, None).await;
    // Wait until the call has reached the server (it never answers).
    for _ in 0..600 {
        if mcp.calls() == ["hang"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(mcp.calls(), ["hang"]);
    let (status, view) = server
        .post(&format!("/sessions/{session}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{view}");
    let events = stream.until(&["TURN_ERROR", "TURN_ENDED"]).await;
    let end = events.last().unwrap();
    assert_eq!(end["payload"]["kind"], "cancelled", "{events:?}");
    // The request in flight is on record as ended with the turn; the call has no result.
    let responses = of_type(&events, "HTTP_RESPONSE");
    let requests = of_type(&events, "HTTP_REQUEST");
    assert_eq!(responses.len(), requests.len(), "{:?}", types(&events));
    assert!(responses.last().unwrap()["payload"]["error"].is_string());
    assert!(
        of_type(&events, "TOOL_RESULT").is_empty(),
        "{:?}",
        types(&events)
    );
    let input = json!({"input": {"tool": "tools__weather", "arguments": {"city": "Rome"}}});
    let (status, body) = server
        .post(&format!("/sessions/{session}/input"), input)
        .await;
    assert_eq!(status, 202, "the session takes input again: {body}");
    let events = stream.until(TERMINAL).await;
    assert_eq!(
        payload_of(&events, "TOOL_RESULT")["status"],
        "ok",
        "{events:?}"
    );
}

/// Runs `/list`; returns what the agent said.
async fn listed(server: &Server) -> Vec<String> {
    let session = server.session("direct", "/list", json!(null)).await;
    let events = (server.events(&session, None).await).until(TERMINAL).await;
    said(&events)
}

#[tokio::test]
async fn a_destructive_tool_the_server_calls_read_only_waits_for_a_decision() {
    let mcp = McpServer::start(TOKEN, false);
    let flags = ["--outbound-allow-private"];
    // `approval` left out: every tool gated, whatever the server annotates.
    let (_dir, server) = direct_with(&flags, &mcp, TOKEN, &mcp.section("")).await;
    assert_eq!(
        listed(&server).await,
        [
            "tools=tools__weather!,tools__delete_file!,tools__whoami!,tools__hang!,tools__big!,tools__wipe_database!"
        ]
    );
    let events = call_with(&server, "tools__wipe_database", json!({"confirm": "yes"})).await;
    let required = events.last().unwrap();
    assert_eq!(required["type"], "TOOL_APPROVAL_REQUIRED", "{events:?}");
    assert_eq!(required["payload"]["name"], "tools__wipe_database");
    assert_eq!(required["payload"]["gated_by"], json!(["manifest"]));
    assert!(mcp.calls().is_empty(), "{:?}", mcp.calls());

    // Trusting the annotations is the manifest's choice.
    deploy_direct(&server, &mcp, &mcp.section("trust_annotations = true\n")).await;
    assert_eq!(
        listed(&server).await,
        [
            "tools=tools__weather,tools__delete_file!,tools__whoami,tools__hang,tools__big,tools__wipe_database"
        ]
    );
    // So is naming the tools that run ungated (the others stay gated).
    deploy_direct(&server, &mcp, &mcp.section("ungated = [\"weather\"]\n")).await;
    assert_eq!(
        listed(&server).await,
        [
            "tools=tools__weather,tools__delete_file!,tools__whoami!,tools__hang!,tools__big!,tools__wipe_database!"
        ]
    );
    let events = call(&server, "tools__weather").await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    assert_eq!(payload_of(&events, "TOOL_RESULT")["status"], "ok");
    assert_eq!(mcp.calls(), ["weather"]);
}

#[tokio::test]
async fn a_server_that_cannot_list_its_tools_fails_the_call_at_once() {
    let mcp = McpServer::start(TOKEN, false);
    let flags = ["--outbound-allow-private"];
    // The wrong bearer: the server answers 401 to everything, its list too.
    let (_dir, server) = direct_with(&flags, &mcp, "not-the-token", &mcp.section("")).await;
    let events = call(&server, "tools__weather").await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    assert!(
        of_type(&events, "TOOL_APPROVAL_REQUIRED").is_empty(),
        "no human is asked about a call that cannot run: {:?}",
        types(&events)
    );
    let result = payload_of(&events, "TOOL_RESULT");
    assert_eq!(result["status"], "error", "{result}");
    let why = result["output"].as_str().unwrap();
    assert!(why.contains("could not list its tools"), "{why}");
    assert!(why.contains("HTTP 401"), "{why}");
    // The agent (its model) saw the error.
    assert!(
        said(&events)[0].contains("could not list its tools"),
        "{events:?}"
    );
    // A tool the manifest names as gated still waits for a decision.
    deploy_direct(&server, &mcp, &mcp.section("approval = [\"weather\"]\n")).await;
    let events = call(&server, "tools__weather").await;
    let required = events.last().unwrap();
    assert_eq!(required["type"], "TOOL_APPROVAL_REQUIRED", "{events:?}");
    assert!(mcp.calls().is_empty());
}

#[tokio::test]
async fn a_credential_in_the_url_path_comes_from_a_secret_and_is_never_journaled() {
    const PATH_KEY: &str = "zap-SECRET-in-path-9f8e7d";
    let mcp = McpServer::start_with(TOKEN, &["--path-secret", PATH_KEY]);
    let section = format!(
        "[mcp.tools]\nurl = \"{}/s/{{secret:MCP_PATH_KEY}}/mcp\"\nbearer_secret = \"MCP_TOKEN\"\napproval = \"none\"\n",
        mcp.origin()
    );
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), &["--outbound-allow-private"]).await;
    for (name, value) in [("MCP_TOKEN", TOKEN), ("MCP_PATH_KEY", PATH_KEY)] {
        let (status, body) = server.put_secret(name, value).await;
        assert_eq!(status, 201, "{body}");
    }
    deploy_direct(&server, &mcp, &section).await;
    let input = json!({"tool": "tools__weather", "arguments": {"city": "Oslo"}});
    let session = server.session("direct", "/call", input).await;
    let events = (server.events(&session, None).await).until(TERMINAL).await;
    assert_eq!(events.last().unwrap()["type"], "TURN_ENDED", "{events:?}");
    // The server answers only under the secret path: `ok` means it was used.
    assert_eq!(
        payload_of(&events, "TOOL_RESULT")["status"],
        "ok",
        "{events:?}"
    );
    assert_eq!(mcp.calls(), ["weather"]);
    let requests = of_type(&events, "HTTP_REQUEST");
    assert!(requests.len() >= 3, "{:?}", types(&events));
    for request in requests {
        assert_eq!(
            request["payload"]["path"], "/s/[REDACTED:MCP_PATH_KEY]/mcp",
            "{request}"
        );
    }
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains(PATH_KEY), "{journal}");
    let stored = support::stored_bytes(dir.path());
    assert!(
        !stored
            .windows(PATH_KEY.len())
            .any(|w| w == PATH_KEY.as_bytes())
    );
    // A secret over plain http to an origin other than loopback is refused.
    let manifest = "[app]\nslug = \"clear\"\n[agent]\nentry = \"agent.wasm\"\n[outbound]\nallow = [\"http://mcp.example.com\"]\n[mcp.x]\nurl = \"http://mcp.example.com/s/{secret:MCP_PATH_KEY}/mcp\"\n";
    let (status, body) = server
        .upload(bundle(&[("agent.wasm", b"")]), manifest)
        .await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("in clear over http://"), "{message}");
}
