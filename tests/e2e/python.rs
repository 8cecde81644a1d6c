//! Python agents end to end: real components built from `examples/python/`
//! and `tests/fixtures/python/` by `agenthost build` (componentize-py, found
//! through `AGENTHOST_COMPONENTIZE_PY`, which `scripts/prereqs/20-python.sh`
//! exports, builds the base; agenthost snapshots it with each app), deployed
//! to the real server: what only Python has (the tool schema from type
//! hints, exceptions with their traceback, modules from the standard
//! library and the project), a changed agent rebuilt without componentize-py,
//! errors at import, `agenthost deploy` of a Python project, a missing
//! componentize-py, and the SDK's own unit tests. What every SDK must do
//! alike (streaming, history, the end user, gated steps, failures, the CPU
//! limit, secrets, the assistant's model loop) runs from one table in
//! `tests/e2e/parity.rs`.
//!
//! Kept lean for CI: each component is built once per test process, every
//! build shares one cache of the base (`target/python-cache-e2e`, built by
//! the first build that misses it, the others waiting), every server shares
//! one compile cache (`target/compile-cache-e2e`), and deploys of Python
//! components take turns, so the first one compiles the interpreter and the
//! others find it in the cache.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::agents::{self, DEPLOYS, last, said, server, turn};
use crate::support::{self, Server, types, workspace};

/// The componentize-py the tests build with, from the prerequisite script.
fn componentize_py() -> PathBuf {
    match std::env::var_os("AGENTHOST_COMPONENTIZE_PY") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => panic!(
            "AGENTHOST_COMPONENTIZE_PY is not set: the Python tests build agents with \
             componentize-py 0.25.1. Run the tests with scripts/test, or first \
             `source scripts/prereqs/20-python.sh` (it installs componentize-py into \
             target/venv and exports AGENTHOST_COMPONENTIZE_PY)"
        ),
    }
}

/// The Python base's cache every build of the tests shares (built by the
/// first build of a test process that finds it missing or stale).
fn python_cache() -> PathBuf {
    workspace().join("target/python-cache-e2e")
}

/// What `agenthost build` of a Python agent is run with.
pub(crate) fn build_env() -> [(&'static str, PathBuf); 2] {
    [
        ("AGENTHOST_COMPONENTIZE_PY", componentize_py()),
        ("AGENTHOST_PYTHON_CACHE", python_cache()),
    ]
}

/// The component of the project `dir` (relative to the workspace), built
/// by `agenthost build` once per test process.
pub(crate) fn python_guest(dir: &str) -> Arc<Vec<u8>> {
    agents::built(dir, "python-guests", &build_env())
}

/// Deploys the project `dir`'s component under `manifest` (`agents::deploy`).
async fn deploy(server: &Server, dir: &str, manifest: &str) -> Value {
    agents::deploy(server, &python_guest(dir), manifest).await
}

fn manifest(slug: &str, extra: &str) -> String {
    agents::manifest(slug, "python", extra)
}

/// What only Python has: the tool's schema from its type hints and its
/// description from its docstring. Streaming and history run in every
/// language (`parity::python_agents_run_every_scenario`).
#[tokio::test]
async fn hello_s_tool_is_described_by_its_type_hints_and_docstring() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    let row = deploy(&server, "examples/python/hello", &manifest("hello-py", "")).await;
    assert_eq!(row["routes"], json!(["/chat"]));
    assert_eq!(
        row["tools"],
        json!([{"name": "word_count", "description": "Counts the words of `text`.",
            "needs_approval": false, "parameters": {"type": "object",
            "properties": {"text": {"type": "string", "default": ""}},
            "additionalProperties": false}}])
    );
}

#[tokio::test]
async fn an_exception_ends_the_turn_with_its_message_and_a_traceback() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    deploy(
        &server,
        "tests/fixtures/python/checks",
        &manifest("checks-py", ""),
    )
    .await;
    let session = server.session("checks-py", "/fail", json!("go")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    let error = last(&events);
    assert_eq!(error["type"], "TURN_ERROR", "{:?}", types(&events));
    assert_eq!(error["payload"]["kind"], "agent_error", "{error}");
    let message = error["payload"]["message"].as_str().unwrap();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines[0], "ValueError: the kettle is empty", "{message}");
    assert_eq!(lines[1], "Traceback (most recent call last):", "{message}");
    // The innermost frames: the author's handler, then the function that raised.
    let frames: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("  File"))
        .collect();
    assert!(frames.len() >= 2, "{message}");
    assert!(
        frames[frames.len() - 2].starts_with("  File \"app.py\", line "),
        "{message}"
    );
    assert!(frames[frames.len() - 2].ends_with(", in fail"), "{message}");
    assert!(frames[frames.len() - 1].ends_with(", in pour"), "{message}");
    // With their source lines: the build kept the project's sources.
    assert!(message.contains("\n    pour({})\n"), "{message}");
    // What the turn said before it failed is kept.
    assert_eq!(said(&events), ["Pouring..."]);
    let (_, record) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(record["status"], "errored");

    // The next turn starts from the snapshot, not from the failed one.
    let fresh = server.session("checks-py", "/ops", json!("add figs")).await;
    let mut stream = server.events(&fresh, None).await;
    let events = turn(&mut stream).await;
    assert_eq!(said(&events), ["Added figs."], "{:?}", types(&events));
}

#[tokio::test]
async fn modules_import_from_the_standard_library_and_the_project_and_tracebacks_show_lines() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    deploy(
        &server,
        "tests/fixtures/python/imports",
        &manifest("imports-py", ""),
    )
    .await;

    // `fractions` and `decimal` (never imported by the SDK), a sibling
    // module, a package and a namespace package; the app printed while
    // imported and prints now.
    let session = server.session("imports-py", "/calc", json!("1/3")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    assert_eq!(
        said(&events),
        ["halved: 1/6 = 0.1667, squared 1/36"],
        "{:?} {}",
        types(&events),
        last(&events)
    );

    // A traceback formatted at run time names the project's file as
    // componentize-py mounts it, with its lines.
    let session = server.session("imports-py", "/trace", json!("go")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    let said = said(&events);
    assert_eq!(said.len(), 1, "{:?} {}", types(&events), last(&events));
    let trace = &said[0];
    assert!(
        trace.starts_with("Traceback (most recent call last):"),
        "{trace}"
    );
    assert!(trace.contains("File \"/0/app.py\", line "), "{trace}");
    assert!(trace.contains(", in divide\n    return a / b"), "{trace}");
    assert!(
        trace.contains("ZeroDivisionError: division by zero"),
        "{trace}"
    );
}

/// Runs `agenthost build` of `project` into `output` with `env` over the
/// tests' build environment.
async fn build(project: &Path, output: &Path, env: &[(&str, &Path)]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("build")
        .arg(project)
        .arg("--output")
        .arg(output)
        .envs(build_env())
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run agenthost build")
}

#[tokio::test]
async fn a_changed_agent_builds_from_the_cached_base_without_componentize_py() {
    let project = tempfile::tempdir().unwrap();
    for file in ["app.py", "agenthost.toml"] {
        std::fs::copy(
            workspace().join("examples/python/hello").join(file),
            project.path().join(file),
        )
        .unwrap();
    }
    let first = project.path().join("first.wasm");
    let out = build(project.path(), &first, &[]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // componentize-py answers `--version` and refuses to build anything.
    let refusing = project.path().join("refusing-componentize-py");
    std::fs::write(
        &refusing,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then exec '{}' --version; fi\n\
             echo \"componentize-py was run: $*\" >&2\nexit 3\n",
            componentize_py().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&refusing, std::fs::Permissions::from_mode(0o755)).unwrap();
    let no_componentize = [("AGENTHOST_COMPONENTIZE_PY", refusing.as_path())];

    let app = project.path().join("app.py");
    let code = std::fs::read_to_string(&app).unwrap();
    assert!(code.contains("\"You said:\""));
    std::fs::write(&app, code.replace("\"You said:\"", "\"You told me:\"")).unwrap();
    let second = project.path().join("second.wasm");
    let out = build(project.path(), &second, &no_componentize).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    for (slug, wasm, answer) in [
        ("first-py", &first, "You said: hi there"),
        ("second-py", &second, "You told me: hi there"),
    ] {
        agents::deploy(&server, &std::fs::read(wasm).unwrap(), &manifest(slug, "")).await;
        let session = server.session(slug, "/chat", json!("hi there")).await;
        let mut stream = server.events(&session, None).await;
        let events = turn(&mut stream).await;
        assert_eq!(said(&events), [answer], "{:?}", types(&events));
    }

    // An exception while app.py is imported fails the build with its traceback.
    std::fs::write(&app, format!("{code}\nraise ValueError(\"no kettle\")\n")).unwrap();
    let out = build(project.path(), &second, &no_componentize).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    // Named as the author knows it, as run-time tracebacks do (not `/0/app.py`).
    assert!(stderr.contains("File \"app.py\", line "), "{stderr}");
    assert!(!stderr.contains("/0/app.py"), "{stderr}");
    assert!(stderr.contains("ValueError: no kettle"), "{stderr}");
    assert!(!stderr.contains("componentize-py was run"), "{stderr}");
    assert!(!stderr.contains("_loader.py"), "{stderr}");

    // So does reading a file while imported: the file is not there at run time.
    std::fs::write(project.path().join("prompt.txt"), "Be brief.").unwrap();
    std::fs::write(
        &app,
        format!("PROMPT = open(\"/0/prompt.txt\").read()\n{code}"),
    )
    .unwrap();
    let out = build(project.path(), &second, &no_componentize).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("FileNotFoundError"), "{stderr}");
    assert!(
        stderr.contains("a Python agent cannot read files"),
        "{stderr}"
    );

    // An endless loop while imported is stopped at the build's limit.
    std::fs::write(&app, format!("{code}\nwhile True:\n    pass\n")).unwrap();
    let limit = [("AGENTHOST_BUILD_INIT_SECS", std::path::Path::new("2"))];
    let out = build(project.path(), &second, &[no_componentize[0], limit[0]]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("module-level code was still running after 2 s"),
        "{stderr}"
    );
}

#[tokio::test]
async fn agenthost_deploy_builds_and_deploys_a_python_project() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    let project = tempfile::tempdir().unwrap();
    for file in ["app.py", "agenthost.toml"] {
        std::fs::copy(
            workspace().join("examples/python/hello").join(file),
            project.path().join(file),
        )
        .unwrap();
    }
    // A project venv never goes into the bundle.
    std::fs::create_dir_all(project.path().join(".venv/lib")).unwrap();
    std::fs::write(project.path().join(".venv/lib/big.py"), "x = 1\n").unwrap();
    // The same code as examples/python/hello: its build (taking its turn with
    // the other deploys) finds every function in the compile cache.
    let _turn = DEPLOYS.lock().await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(project.path())
        .args(["--url", &server.url, "--api-key", support::KEY])
        .envs(build_env())
        .output()
        .await
        .expect("run agenthost deploy");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("deployed hello-py v1"), "{stdout}");
    assert!(stdout.contains("status active"), "{stdout}");
    let (_, rows) = server.get("/apps/hello-py/deployments").await;
    assert_eq!(rows[0]["entry"], "agent.wasm");

    let session = server.session("hello-py", "/chat", json!("hi there")).await;
    let mut stream = server.events(&session, None).await;
    let events = turn(&mut stream).await;
    assert_eq!(said(&events), ["You said: hi there"]);
}

/// The SHA-256 of each core module in `component` with over 1 MiB of code
/// that imports its memory: a Python agent's interpreter library.
fn interpreter_modules(component: &[u8]) -> Vec<String> {
    use sha2::{Digest, Sha256};
    use wasmparser::{Parser, Payload};
    let mut found = Vec::new();
    for payload in Parser::new(0).parse_all(component) {
        if let Payload::ModuleSection {
            unchecked_range, ..
        } = payload.unwrap()
        {
            let module = &component[unchecked_range];
            let (mut code, mut defines_memory) = (0, false);
            for inner in Parser::new(0).parse_all(module) {
                match inner.unwrap() {
                    Payload::CodeSectionStart { size, .. } => code = size,
                    Payload::MemorySection(_) => defines_memory = true,
                    _ => {}
                }
            }
            if code > 1 << 20 && !defines_memory {
                found.push(hex::encode(Sha256::digest(module)));
            }
        }
    }
    found
}

/// Two different Python agents share one compiled interpreter: it is
/// compiled once beside the compile cache and linked by each deployment,
/// which runs at once; each is then compiled whole in the background (its
/// artifact grows to hold the interpreter), and both run after a restart.
#[tokio::test]
async fn python_agents_share_one_compiled_interpreter_and_run_after_a_restart() {
    let dir = support::data_dir();
    let server = server(dir.path(), &[]).await;
    let hello = python_guest("examples/python/hello");
    let checks = python_guest("tests/fixtures/python/checks");
    let interpreter = interpreter_modules(&hello);
    assert_eq!(
        interpreter.len(),
        1,
        "one interpreter library in a Python agent"
    );
    assert_eq!(
        interpreter_modules(&checks),
        interpreter,
        "the same interpreter in both"
    );

    let mut artifacts = Vec::new();
    for (slug, component) in [("hello-py", &hello), ("checks-py", &checks)] {
        let row = agents::deploy(&server, component, &manifest(slug, "")).await;
        let id = row["id"].as_str().unwrap().to_string();
        let path = dir
            .path()
            .join("deployments")
            .join(&id)
            .join("component.cwasm");
        artifacts.push((path, component.len() as u64));
    }
    let modules = workspace().join("target/compile-cache-e2e/modules");
    let compiled = std::fs::read_dir(&modules)
        .unwrap()
        .flatten()
        .any(|engine| {
            engine
                .path()
                .join(format!("{}.cwasm", interpreter[0]))
                .is_file()
        });
    assert!(
        compiled,
        "the interpreter is compiled in {}",
        modules.display()
    );
    let session = server.session("hello-py", "/chat", json!("at once")).await;
    let mut stream = server.events(&session, None).await;
    assert_eq!(said(&turn(&mut stream).await), ["You said: at once"]);

    // Compiled whole, an artifact is about twice its component.
    let waited = std::time::Instant::now();
    for (path, component) in &artifacts {
        while std::fs::metadata(path).map_or(0, |m| m.len()) < *component {
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(600),
                "{} was not compiled whole",
                path.display()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    server.kill();
    let server = agents::server(dir.path(), &[]).await;
    let session = server
        .session("hello-py", "/chat", json!("after a restart"))
        .await;
    let mut stream = server.events(&session, None).await;
    assert_eq!(
        said(&turn(&mut stream).await),
        ["You said: after a restart"]
    );
    let session = server
        .session("checks-py", "/ops", json!("mixed apples pears"))
        .await;
    let mut stream = server.events(&session, None).await;
    let suspended = turn(&mut stream).await;
    assert_eq!(
        last(&suspended)["type"],
        "TOOL_APPROVAL_REQUIRED",
        "{:?}",
        types(&suspended)
    );
}

#[tokio::test]
async fn a_missing_componentize_py_says_how_to_install_it() {
    let project = tempfile::tempdir().unwrap();
    for file in ["app.py", "agenthost.toml"] {
        std::fs::copy(
            workspace().join("examples/python/hello").join(file),
            project.path().join(file),
        )
        .unwrap();
    }
    let empty_path = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agenthost"))
        .arg("deploy")
        .arg(project.path())
        .args(["--url", "http://127.0.0.1:9", "--api-key", "unused"])
        .env_remove("AGENTHOST_COMPONENTIZE_PY")
        .env_remove("VIRTUAL_ENV")
        .env("PATH", empty_path.path())
        .output()
        .expect("run agenthost deploy");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("componentize-py was not found"), "{stderr}");
    assert!(
        stderr.contains("pip install componentize-py==0.25.1"),
        "{stderr}"
    );
    assert!(stderr.contains("AGENTHOST_COMPONENTIZE_PY"), "{stderr}");
}

/// The SDK's unit tests (plain CPython: schemas, streams, conversations,
/// retries, SSE, the resumed step's plan, history paging, failure messages).
#[test]
fn the_python_sdk_unit_tests_pass() {
    let venv_python = componentize_py().with_file_name("python");
    let python = if venv_python.exists() {
        venv_python
    } else {
        PathBuf::from("python3")
    };
    let sdk = workspace().join("guest-sdk/python");
    let output = Command::new(&python)
        .args([
            "-B", "-m", "unittest", "discover", "-s", "tests", "-t", "tests",
        ])
        .current_dir(&sdk)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", python.display()));
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    // Plain `OK`: not `OK (skipped=1)`, nor expected failures.
    assert_eq!(
        report.lines().rev().find(|l| !l.trim().is_empty()),
        Some("OK"),
        "{report}"
    );
    let ran: usize = report
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    let defined = python_tests_defined(&sdk.join("tests"));
    assert_eq!(ran, defined, "every SDK test defined must run: {report}");
}

/// The `def test…` methods of the files unittest's discovery reads
/// (`test*.py`).
fn python_tests_defined(dir: &std::path::Path) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("read the SDK's tests") {
        let path = entry.expect("a test file").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("test") && name.ends_with(".py") {
            let code = std::fs::read_to_string(&path).expect("read a test file");
            count += (code.lines())
                .filter(|l| l.trim_start().starts_with("def test"))
                .count();
        }
    }
    assert!(count > 0, "no tests found in {}", dir.display());
    count
}
