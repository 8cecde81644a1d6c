//! The Rust names the maps name: every backticked span of ARCHITECTURE.md,
//! CONTRIBUTING.md and tests/README.md that reads as a Rust name (a path
//! with `::`, a call `name()`, a macro `name!`, or an `UpperCamelCase`
//! type) must still be an identifier of the code, so a renamed or removed
//! type cannot linger in a map.

use std::collections::HashSet;

use crate::docs::{backticked, prose};
use crate::source::{code_only, files, read, root};

/// Where the names may live: every Rust file of the repository.
const CODE_DIRS: &[&str] = &["host", "crates", "guest-sdk", "examples", "tests"];

/// The segments of a span that reads as a Rust name, or `None`.
pub fn rust_name(span: &str) -> Option<Vec<&str>> {
    let bare = span
        .strip_suffix("()")
        .or_else(|| span.strip_suffix('!'))
        .unwrap_or(span);
    let marked = bare.len() != span.len();
    let segments: Vec<&str> = bare.split("::").collect();
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    if !segments.iter().all(|s| ident(s)) {
        return None;
    }
    let camel = segments.len() == 1
        && bare.starts_with(|c: char| c.is_ascii_uppercase())
        && bare.chars().any(|c| c.is_ascii_lowercase())
        && !bare.contains('_');
    (segments.len() > 1 || marked || camel).then_some(segments)
}

/// Every identifier in the code (comments and literals left out).
fn identifiers() -> HashSet<String> {
    let root = root();
    let mut words = HashSet::new();
    for dir in CODE_DIRS {
        for path in files(&root.join(dir), ".rs") {
            let code = code_only(&read(&path));
            words.extend(
                code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .map(str::to_string),
            );
        }
    }
    words
}

/// Every Rust name a map names that the code does not, as `doc:line: …`.
pub fn missing_names(docs: &[&str]) -> Vec<String> {
    let words = identifiers();
    let mut missing = Vec::new();
    for doc in docs {
        let text = prose(&read(&root().join(doc)));
        for (line, span) in backticked(&text) {
            let Some(segments) = rust_name(&span) else {
                continue;
            };
            if let Some(gone) = segments.iter().find(|s| !words.contains(**s)) {
                missing.push(format!(
                    "{doc}:{line}: `{span}` names `{gone}`, which no Rust file defines or uses. Fix: write the name the code has now, or drop it; if it is not a Rust name, write it without backticks."
                ));
            }
        }
    }
    missing
}

#[test]
fn spans_are_rust_names_only_when_they_look_like_them() {
    assert_eq!(rust_name("store::start"), Some(vec!["store", "start"]));
    assert_eq!(rust_name("TurnSink"), Some(vec!["TurnSink"]));
    assert_eq!(rust_name("start_turns()"), Some(vec!["start_turns"]));
    assert_eq!(rust_name("bindgen!"), Some(vec!["bindgen"]));
    for not_a_name in [
        "running",
        "TURN_STARTED",
        "host/src/api/",
        "GET /sessions",
        "Last-Event-ID",
        "x::",
        "a b",
    ] {
        assert_eq!(rust_name(not_a_name), None, "{not_a_name}");
    }
}
