//! The log check: every credential and secret value the tests use is
//! registered here (the support code registers what it mints or sends), and
//! each server's log, written at `info` to a file, is scanned for all of
//! them when its handle goes. A value in a log fails the test, naming the
//! value's kind and the line.

use std::path::Path;
use std::sync::Mutex;

/// Every value registered so far in this test process, with its kind. The
/// values are random (keys, tokens) or chosen by a test to be unique, so
/// a value of one test cannot turn up in another's log by chance.
static USED: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

/// Shorter values could occur in a log line by chance.
const SHORTEST: usize = 8;

/// Registers `value` (a key, token or secret value) as `kind`: no server
/// log may ever hold it.
pub fn used(kind: &'static str, value: &str) {
    if value.len() < SHORTEST {
        return;
    }
    let mut used = USED.lock().unwrap_or_else(|p| p.into_inner());
    if !used.iter().any(|(_, v)| v == value) {
        used.push((kind, value.to_string()));
    }
}

/// Registers what a JSON response hands out: a minted key (`key`, with its
/// `class`), an end-user token (`token`) or a stream token (`stream_token`).
pub fn from_response(body: &serde_json::Value) {
    if let Some(key) = body["key"].as_str() {
        let kind = match body["class"].as_str() {
            Some("platform") => "platform key",
            Some("invocation") => "invocation key",
            _ => "API key",
        };
        used(kind, key);
    }
    if let Some(token) = body["token"].as_str() {
        used("end-user token", token);
    }
    if let Some(token) = body["stream_token"].as_str() {
        used("stream token", token);
    }
}

/// Scans the log at `path` for every registered value. Panics naming the
/// first leak's kind, its line number and the line.
pub fn check(path: &Path) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    if let Some(leak) = find(&bytes) {
        panic!("{leak} (log {})", path.display());
    }
}

/// The first registered value in `log`, described. One search of the
/// whole log per value; lines are counted only for a hit.
pub fn find(log: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(log);
    let used = USED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (at, kind) = (used.iter())
        .filter_map(|(kind, value)| text.find(value.as_str()).map(|at| (at, kind)))
        .min()?;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let number = text[..at].matches('\n').count() + 1;
    Some(format!(
        "a {kind} is in the server's log, line {number}: {}",
        &text[start..end]
    ))
}

/// The last `n` lines of the log at `path`, for a failing test's output.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
