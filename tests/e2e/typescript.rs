//! TypeScript agents end to end: real components built from
//! `examples/typescript/` and `tests/fixtures/typescript/` by `agenthost
//! build` (esbuild and componentize-js from `examples/typescript/node_modules`,
//! which `scripts/prereqs/40-node.sh` installs with `npm ci` and exports as
//! `AGENTHOST_NODE_MODULES`), deployed to the real server: what only
//! TypeScript has (the tool schema as written, bad arguments and unknown
//! tools, exceptions with their stack mapped to agent.ts, a refused fetch),
//! the TypeScript model loop against the fake OpenAI-compatible server
//! (429 with Retry-After, `length`), `agenthost deploy` of a TypeScript project with
//! its own node_modules, a missing toolchain, and the SDK's unit tests.
//!
//! What every SDK must do alike (streaming, history, the end user, gated
//! steps, failures, the CPU limit, secrets, the assistant's model loop)
//! runs from one table in `tests/e2e/parity.rs`.
//!
//! Kept lean for CI: each component is built once per test process, every
//! server shares one compile cache (`target/compile-cache-e2e`), and
//! deploys of TypeScript components take turns, so the first one compiles
//! the engine (SpiderMonkey) and the others find it in the cache.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::agents::{self, DEPLOYS, last, of_type, said, server, turn};
use crate::support::fake_openai::{FakeOpenAi, Reply, chunk};
use crate::support::{self, Server, types, workspace};

/// The node_modules the tests build with, from the prerequisite script.
fn node_modules() -> PathBuf {
    match std::env::var_os("AGENTHOST_NODE_MODULES") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "AGENTHOST_NODE_MODULES is not set: the TypeScript tests build agents with the \
             esbuild and componentize-js of examples/typescript/node_modules. Run the tests \
             with scripts/test, or first `source scripts/prereqs/40-node.sh` (it runs npm ci \
             there and exports AGENTHOST_NODE_MODULES)"
        ),
    }
}

/// The TypeScript base's cache every build of the tests shares (made by
/// the first build of a test process that finds it missing or stale).
fn typescript_cache() -> PathBuf {
    workspace().join("target/typescript-cache-e2e")
}

/// The component of the project `dir` (relative to the workspace), built
/// by `agenthost build` once per test process.
pub(crate) fn typescript_guest(dir: &str) -> Arc<Vec<u8>> {
    agents::built(
        dir,
        "typescript-guests",
        &[
            ("AGENTHOST_NODE_MODULES", node_modules()),
            ("AGENTHOST_TYPESCRIPT_CACHE", typescript_cache()),
        ],
    )
}

/// Deploys the project `dir`'s component under `manifest` (`agents::deploy`).
async fn deploy(server: &Server, dir: &str, manifest: &str) -> Value {
    agents::deploy(server, &typescript_guest(dir), manifest).await
}

fn manifest(slug: &str, extra: &str) -> String {
    agents::manifest(slug, "typescript", extra)
}

/// What only TypeScript has: the tool's schema as written in agent.ts.
/// Streaming and history run in every language
/// (`parity::typescript_agents_run_every_scenario`).
#[tokio::test]
async fn hello_s_tool_is_described_as_written() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    let row = deploy(
        &server,
        "examples/typescript/hello",
        &manifest("hello-ts", ""),
    )
    .await;
    assert_eq!(row["routes"], json!(["/chat"]));
    assert_eq!(
        row["tools"],
        json!([{"name": "word_count", "description": "Counts the words of `text`.",
            "needs_approval": false, "parameters": {"type": "object",
            "properties": {"text": {"type": "string", "default": ""}},
            "additionalProperties": false}}])
    );
}

/// Arguments that do not fit the tool's schema, and an unknown tool: `error`
/// results, worded as in Rust. The gated step itself, approved and denied,
/// runs in every language (`parity::typescript_agents_run_every_scenario`).
#[tokio::test]
async fn bad_arguments_and_an_unknown_tool_are_error_results() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    deploy(
        &server,
        "tests/fixtures/typescript/checks",
        &manifest("checks-ts", ""),
    )
    .await;
    let session = server.session("checks-ts", "/ops", json!("bad")).await;
    let mut stream = server.events(&session, None).await;
    let bad = turn(&mut stream).await;
    assert_eq!(
        said(&bad),
        [
            "add_record failed: invalid arguments: missing field `name`. \
          no_such_tool failed: unknown tool: no_such_tool."
        ],
        "{:?} {}",
        types(&bad),
        last(&bad)
    );
}

#[tokio::test]
async fn an_exception_ends_the_turn_with_its_message_and_stack_and_a_refused_fetch_says_why() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    deploy(
        &server,
        "tests/fixtures/typescript/checks",
        &manifest("checks-ts", ""),
    )
    .await;
    let session = server.session("checks-ts", "/fail", json!("go")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{:?}", types(&events));
    assert_eq!(error["payload"]["kind"], "agent_error");
    let message = error["payload"]["message"].as_str().unwrap();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines[0], "TypeError: the kettle is empty", "{message}");
    assert_eq!(lines[1], "Stack (innermost first):", "{message}");
    // The innermost frames, mapped back to agent.ts (the source map the
    // build embeds): the function that threw, then the author's route.
    let source =
        std::fs::read_to_string(workspace().join("tests/fixtures/typescript/checks/agent.ts"))
            .unwrap();
    let line_of = |code: &str| 1 + source.lines().position(|l| l.contains(code)).unwrap();
    let thrown = line_of("throw new TypeError('the kettle is empty')");
    let called = line_of("  pour({});");
    assert_eq!(
        lines[2],
        format!("  at pour (agent.ts:{thrown}:11)"),
        "{message}"
    );
    assert_eq!(
        lines[3],
        format!("  at fail (agent.ts:{called}:3)"),
        "{message}"
    );
    // The SDK's own frames are named as its files, never the bundle's.
    assert!(
        lines[4..]
            .iter()
            .any(|l| l.contains("(@agenthost/sdk/src/export.ts:")),
        "{message}"
    );
    assert!(!message.contains("agent.js"), "{message}");
    assert!(!message.contains("initializer.js"), "{message}");
    // What the turn said before it failed is kept.
    assert_eq!(said(&events), ["Pouring..."]);
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "errored");

    // A fetch the allowlist refuses (none is allowed here) says so, as the
    // Rust and Python SDKs word it; the journal has the refusal.
    let refused = server
        .session("checks-ts", "/fetch", json!("http://127.0.0.1:9/status"))
        .await;
    let mut stream = server.events(&refused, None).await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{:?}", types(&events));
    assert_eq!(error["payload"]["kind"], "agent_error");
    assert_eq!(
        error["payload"]["message"],
        "the host refused the request to http://127.0.0.1:9: it is not on this deployment's \
         outbound allowlist ([outbound] allow in agenthost.toml)"
    );
    let denied = of_type(&events, "HTTP_REQUEST_DENIED");
    assert_eq!(denied.len(), 1, "{:?}", types(&events));
    assert_eq!(denied[0]["payload"]["origin"], "http://127.0.0.1:9");

    // The next turn starts from the snapshot, not from the failed one.
    let fresh = server.session("checks-ts", "/ops", json!("add figs")).await;
    let mut stream = server.events(&fresh, None).await;
    let events = turn(&mut stream).await;
    assert_eq!(said(&events), ["Added figs."], "{:?}", types(&events));
}

#[tokio::test]
async fn the_typescript_model_loop_retries_a_429_and_reports_a_cut_off_answer() {
    let fake = FakeOpenAi::start(vec![
        Reply::rate_limited(1),
        Reply::Stream(vec![
            chunk(json!({"content": "I was about to"}), None),
            chunk(json!({}), Some("length")),
        ]),
        Reply::status(401, "Incorrect API key provided"),
    ])
    .await;
    let dir = support::data_dir();
    let server = server(dir.path(), &["--outbound-allow-private"]).await;
    let extra = fake.configure(&server).await;
    deploy(
        &server,
        "examples/typescript/assistant",
        &manifest("assistant-ts", &extra),
    )
    .await;

    // 429 with Retry-After: retried once; the answer is cut off (`length`).
    let session = server
        .session("assistant-ts", "/chat", json!("tell me everything"))
        .await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{:?}", types(&events));
    assert_eq!(
        error["payload"]["message"],
        "the model's answer was cut off: it reached its output token limit (finish_reason `length`)"
    );
    assert_eq!(said(&events), ["I was about to"]);
    assert_eq!(fake.received().len(), 2);

    // A refused key is said in words, naming the secret to fix.
    let session = server
        .session("assistant-ts", "/chat", json!("hello"))
        .await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{:?}", types(&events));
    assert_eq!(
        error["payload"]["message"],
        "the model provider refused the API key (HTTP 401): Incorrect API key provided; \
         check the OPENAI_API_KEY secret (PUT /secrets/OPENAI_API_KEY)"
    );
}

/// A copy of examples/typescript/hello whose node_modules is the examples'.
fn hello_project() -> tempfile::TempDir {
    let project = tempfile::tempdir().unwrap();
    for file in ["agent.ts", "agenthost.toml", "package.json"] {
        std::fs::copy(
            workspace().join("examples/typescript/hello").join(file),
            project.path().join(file),
        )
        .unwrap();
    }
    project
}

#[tokio::test]
async fn agenthost_deploy_builds_a_typescript_project_with_its_own_node_modules() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    let project = hello_project();
    // The project's own node_modules (here a link to the examples'), found
    // without AGENTHOST_NODE_MODULES, and never put into the bundle.
    std::os::unix::fs::symlink(node_modules(), project.path().join("node_modules")).unwrap();
    // The same code as examples/typescript/hello: its build (taking its turn
    // with the other deploys) finds every function in the compile cache.
    let _turn = DEPLOYS.lock().await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(project.path())
        .args(["--url", &server.url, "--api-key", support::KEY])
        .env_remove("AGENTHOST_NODE_MODULES")
        .env("AGENTHOST_TYPESCRIPT_CACHE", typescript_cache())
        .output()
        .await
        .expect("run agenthost deploy");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("deployed hello-ts v1"), "{stdout}");
    assert!(stdout.contains("status active"), "{stdout}");
    let (_, rows) = server.get("/apps/hello-ts/deployments").await;
    assert_eq!(rows[0]["entry"], "agent.wasm");

    let session = server.session("hello-ts", "/chat", json!("hi there")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    assert_eq!(said(&events), ["You said: hi there"]);
}

/// A changed agent builds in this process from the cached base (the
/// splicer ran once, for the first build of the tests), and runs the
/// change; the server compiled the engine's code once for both builds (a
/// shared module, `runtime::compile::split_state`); an error thrown while the module
/// is evaluated fails the build with its message at its place in agent.ts,
/// and an endless loop there fails it at the build's time limit.
#[tokio::test]
async fn a_changed_agent_builds_from_the_cached_base_and_an_error_at_load_says_why() {
    // The tests' first build (of the examples' hello) makes the base.
    let hello = typescript_guest("examples/typescript/hello");
    let dir = support::data_dir();
    // Its own shared modules, the tests' compiled functions.
    let cache = tempfile::tempdir().unwrap();
    let shared = PathBuf::from(agents::compile_cache());
    std::fs::create_dir_all(&shared).unwrap();
    for entry in std::fs::read_dir(&shared).unwrap().flatten() {
        if entry.file_name() != "modules" {
            std::os::unix::fs::symlink(entry.path(), cache.path().join(entry.file_name())).unwrap();
        }
    }
    let cache_flag = cache.path().display().to_string();
    let server = Server::start_with(dir.path(), &["--compile-cache-dir", &cache_flag]).await;
    agents::deploy(&server, &hello, &manifest("hello-ts", "")).await;
    let project = hello_project();
    std::os::unix::fs::symlink(node_modules(), project.path().join("node_modules")).unwrap();
    let source = project.path().join("agent.ts");
    let code = std::fs::read_to_string(&source).unwrap();
    assert!(code.contains("reply.write('You said:');"));
    std::fs::write(&source, code.replace("'You said:'", "'Heard:'")).unwrap();
    let _turn = DEPLOYS.lock().await;
    let output = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(project.path())
        .args(["--url", &server.url, "--api-key", support::KEY])
        .env("AGENTHOST_TYPESCRIPT_CACHE", typescript_cache())
        .output()
        .expect("run agenthost deploy");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("building the TypeScript base"), "{stderr}");
    let session = server.session("hello-ts", "/chat", json!("hi again")).await;
    let mut stream = server.events(&session, None).await;
    assert_eq!(said(&turn(&mut stream).await), ["Heard: hi again"]);
    // The two builds share the engine's code: compiled once, by content.
    let compiled: Vec<PathBuf> = std::fs::read_dir(cache.path().join("modules"))
        .unwrap()
        .flatten()
        .flat_map(|engine| std::fs::read_dir(engine.path()).unwrap().flatten())
        .map(|file| file.path())
        .filter(|path| path.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(compiled.len(), 1, "{compiled:?}");

    std::fs::write(
        &source,
        format!("{code}\nthrow new RangeError('no model is configured for this agent');\n"),
    )
    .unwrap();
    let built = tempfile::tempdir().unwrap();
    let build = |env: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_agenthost"))
            .arg("build")
            .arg(project.path())
            .arg("--output")
            .arg(built.path().join("agent.wasm"))
            .env("AGENTHOST_TYPESCRIPT_CACHE", typescript_cache())
            .envs(env.iter().copied())
            .output()
            .expect("run agenthost build")
    };
    let output = build(&[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot evaluate the agent's code"),
        "{stderr}"
    );
    assert!(
        stderr.contains("RangeError: no model is configured for this agent"),
        "{stderr}"
    );
    // Its position is named in agent.ts (the engine knows only the bundle's).
    let thrown = std::fs::read_to_string(&source)
        .unwrap()
        .lines()
        .position(|line| line.starts_with("throw new RangeError"))
        .unwrap()
        + 1;
    assert!(stderr.contains(&format!("agent.ts:{thrown}:")), "{stderr}");
    assert!(!stderr.contains("agent.js:"), "{stderr}");
    assert!(!built.path().join("agent.wasm").exists());

    // An endless loop at module level is stopped at the build's limit.
    std::fs::write(&source, format!("{code}\nwhile (Date.now() > 0) {{}}\n")).unwrap();
    let output = build(&[("AGENTHOST_BUILD_INIT_SECS", "2")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("module-level code was still running after 2 s"),
        "{stderr}"
    );
}

#[test]
fn a_missing_toolchain_says_what_to_install() {
    let project = hello_project();
    let output = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(project.path())
        .args(["--url", "http://127.0.0.1:9", "--api-key", "unused"])
        .env_remove("AGENTHOST_NODE_MODULES")
        .output()
        .expect("run agenthost deploy");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the TypeScript toolchain was not found"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "npm install --save-dev esbuild@0.28.2 @bytecodealliance/componentize-js@0.23.0 \
             @bytecodealliance/preview2-shim@0.25.0"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("AGENTHOST_NODE_MODULES"), "{stderr}");
    // The SDK by its path only: the bare name is not published, and a name
    // no one owns invites anyone to publish under it.
    let sdk = support::workspace().join("guest-sdk/typescript");
    let sdk = sdk.canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("npm install {}", sdk.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("npm install @agenthost/sdk"), "{stderr}");

    // The packages are there but Node.js is not.
    let empty_path = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(project.path())
        .args(["--url", "http://127.0.0.1:9", "--api-key", "unused"])
        .env("AGENTHOST_NODE_MODULES", node_modules())
        .env("PATH", empty_path.path())
        .output()
        .expect("run agenthost deploy");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("node was not found on PATH"), "{stderr}");
    assert!(stderr.contains("Node.js 20 or later"), "{stderr}");
}

/// The `test(…)` calls (`test.skip(…)` and the like included) at the start
/// of a line of the `*.test.ts` files `run.mjs` runs.
fn typescript_tests_defined(dir: &std::path::Path) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("read the SDK's tests") {
        let path = entry.expect("a test file").path();
        if path.to_string_lossy().ends_with(".test.ts") {
            let code = std::fs::read_to_string(&path).expect("read a test file");
            count += (code.lines())
                .map(str::trim_start)
                .filter(|l| l.starts_with("test(") || l.starts_with("test."))
                .count();
        }
    }
    assert!(count > 0, "no tests found in {}", dir.display());
    count
}

/// The SDK's unit tests (plain Node.js: schemas, JSON text, history paging,
/// the resumed step's plan, failure messages, SSE, streamed completions,
/// conversations, steps, retries), and a type check of the SDK, the examples
/// and the fixtures with TypeScript's `tsc` (all from the examples' node_modules).
#[test]
fn the_typescript_sdk_unit_tests_and_type_check_pass() {
    let modules = node_modules();
    let output = Command::new("node")
        .arg(workspace().join("guest-sdk/typescript/tests/run.mjs"))
        .env("ESBUILD", modules.join("esbuild/lib/main.js"))
        .output()
        .expect("run node");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // node --test's summary: every test defined passed, none skipped,
    // left to do, cancelled or failed.
    let summary = |what: &str| -> usize {
        (report.lines())
            .find_map(|l| l.strip_prefix(&format!("# {what} "))?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `# {what}` in the report: {report}"))
    };
    let defined = typescript_tests_defined(&workspace().join("guest-sdk/typescript/tests"));
    assert_eq!(
        summary("tests"),
        defined,
        "every SDK test defined must run: {report}"
    );
    assert_eq!(summary("pass"), defined, "{report}");
    for none in ["fail", "skipped", "todo", "cancelled"] {
        assert_eq!(summary(none), 0, "# {none}: {report}");
    }

    let output = Command::new(modules.join(".bin/tsc"))
        .args(["--noEmit", "-p"])
        .arg(workspace().join("examples/typescript"))
        .output()
        .expect("run tsc");
    assert!(
        output.status.success(),
        "tsc found type errors:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
