//! The harness the Python and TypeScript e2e tests share: an agent project
//! built by `agenthost build` once per test process, servers sharing one
//! compile cache (`target/compile-cache-e2e`), deploys that take turns (so
//! all but the first find the interpreter in the cache), and small readers
//! of a turn's events (the checks every SDK must pass are the scenarios of
//! `tests/sdk/parity.toml`, run by `tests/e2e/parity.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::{EventStream, Server, bundle, workspace};

/// What ends a turn on the stream.
pub const TERMINAL: &[&str] = &["TURN_ENDED", "TURN_ERROR", "TOOL_APPROVAL_REQUIRED"];

/// The component of the project `dir` (relative to the workspace), built by
/// `agenthost build` once per test process into `target/<output_dir>/`,
/// with `env` (the variable that names the language's toolchain) set.
pub fn built(dir: &str, output_dir: &str, env: &[(&str, PathBuf)]) -> Arc<Vec<u8>> {
    /// One cell per project, filled by the first test that needs it.
    type Built = Arc<OnceLock<Arc<Vec<u8>>>>;
    static BUILT: OnceLock<Mutex<HashMap<String, Built>>> = OnceLock::new();
    let cell = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(dir.to_string())
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let output = workspace()
            .join("target")
            .join(output_dir)
            .join(dir.replace('/', "_"))
            .with_extension("wasm");
        let status = Command::new(env!("CARGO_BIN_EXE_agenthost"))
            .arg("build")
            .arg(workspace().join(dir))
            .arg("--output")
            .arg(&output)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .status()
            .expect("run agenthost build");
        assert!(status.success(), "agenthost build {dir} failed");
        Arc::new(std::fs::read(&output).expect("read the built component"))
    })
    .clone()
}

/// The compile cache every test server shares.
pub fn compile_cache() -> String {
    workspace()
        .join("target/compile-cache-e2e")
        .display()
        .to_string()
}

/// A server (with `flags`) sharing the tests' compile cache.
pub async fn server(dir: &Path, flags: &[&str]) -> Server {
    let cache = compile_cache();
    let mut all = vec!["--compile-cache-dir", cache.as_str()];
    all.extend_from_slice(flags);
    Server::start_with(dir, &all).await
}

/// Held while an interpreter's component is deployed.
pub static DEPLOYS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Deploys `component` under `manifest`; waits for the build, one deploy at
/// a time (so all but the first hit the cache).
pub async fn deploy(server: &Server, component: &[u8], manifest: &str) -> Value {
    let _turn = DEPLOYS.lock().await;
    let (status, row) = server
        .upload(bundle(&[("agent.wasm", component)]), manifest)
        .await;
    assert_eq!(status, 202, "{row}");
    let row = server.wait_built(&row).await;
    assert_eq!(row["status"], "active", "{row}");
    row
}

/// A manifest for an agent in `language`.
pub fn manifest(slug: &str, language: &str, extra: &str) -> String {
    format!("[app]\nslug = \"{slug}\"\n[agent]\nlanguage = \"{language}\"\n{extra}")
}

pub async fn turn(stream: &mut EventStream) -> Vec<Value> {
    stream.until(TERMINAL).await
}

pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

pub fn said(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "MESSAGE_END" && e["payload"]["role"] == "assistant")
        .map(|e| e["payload"]["text"].as_str().unwrap().to_string())
        .collect()
}

pub fn deltas(events: &[Value]) -> Vec<String> {
    of_type(events, "MESSAGE_DELTA")
        .iter()
        .filter_map(|e| e["payload"]["delta"]["text"].as_str().map(String::from))
        .collect()
}

pub fn last(events: &[Value]) -> &Value {
    events.last().unwrap()
}

pub async fn input(server: &Server, session: &str, text: &str) {
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": text}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
}

pub async fn decide(server: &Server, session: &str, decision: Value) {
    let (status, body) = server
        .post(&format!("/sessions/{session}/approval"), decision)
        .await;
    assert_eq!(status, 202, "{body}");
}
