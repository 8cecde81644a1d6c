//! The paths the maps name: every repository path in backticks or in a
//! link of ARCHITECTURE.md, CONTRIBUTING.md and tests/README.md must exist,
//! and tests/README.md must name every test file.

use std::path::Path;

use crate::source::{files, read, rel, root};

/// The documents whose paths are checked.
pub const MAPS: &[&str] = &["ARCHITECTURE.md", "CONTRIBUTING.md", "tests/README.md"];

/// File endings that make a backticked span a path even when its first
/// directory does not exist (a renamed top-level directory).
const EXTENSIONS: &[&str] = &[
    ".rs", ".md", ".wit", ".toml", ".py", ".ts", ".mjs", ".sh", ".json", ".lock", ".txt",
];

/// Path components of generated or installed files: not in a fresh clone.
const GENERATED: &[&str] = &["target", "node_modules", ".venv", "venv"];

/// Whether a backticked span reads as a repository path: path characters
/// only, a `/` in it, not absolute (HTTP paths start with `/`), and either
/// its first component exists or it ends like a source file. So
/// `host/src/api/` and `docs/gone.md` are paths; `text/event-stream`,
/// `GET /sessions` and `<data-dir>/master.key` are not.
fn is_path(span: &str, doc_dir: &Path) -> bool {
    let path_chars = span
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c));
    if !path_chars || !span.contains('/') || span.starts_with('/') || span.contains("//") {
        return false;
    }
    if span.split('/').any(|c| GENERATED.contains(&c)) {
        return false;
    }
    let first = span.split('/').next().unwrap_or_default();
    root().join(first).exists()
        || doc_dir.join(first).exists()
        || EXTENSIONS.iter().any(|e| span.ends_with(e))
}

/// A document's prose: fenced code blocks blanked, line numbers kept.
pub fn prose(text: &str) -> String {
    let mut fenced = false;
    let prose: Vec<&str> = (text.lines())
        .map(|line| {
            let fence = line.trim_start().starts_with("```");
            fenced ^= fence;
            if fence || fenced { "" } else { line }
        })
        .collect();
    prose.join("\n")
}

/// The backticked spans of `prose` (the odd pieces between backticks,
/// which may wrap), trimmed, each with the line it starts on.
pub fn backticked(prose: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut offset = 0;
    for (k, span) in prose.split('`').enumerate() {
        let line = prose[..offset].matches('\n').count() + 1;
        offset += span.len() + 1;
        if k % 2 == 1 {
            spans.push((line, span.trim().to_string()));
        }
    }
    spans
}

/// Every path `doc` names that does not exist, as `doc:line: …`.
pub fn missing_paths(doc: &str) -> Vec<String> {
    let root = root();
    let doc_path = root.join(doc);
    let doc_dir = doc_path.parent().unwrap_or(&root).to_path_buf();
    let prose = prose(&read(&doc_path));
    let mut missing = Vec::new();
    for (line, span) in backticked(&prose) {
        if is_path(&span, &doc_dir) && !root.join(&span).exists() && !doc_dir.join(&span).exists() {
            missing.push(format!(
                "{doc}:{line}: `{span}` names no file or directory. Fix: point it at the path that exists now (paths are relative to the repository's root), or drop it; if it is not a path, write it without backticks."
            ));
        }
    }
    for (n, line) in prose.lines().enumerate() {
        // Links: [text](target), relative to the document.
        for piece in line.split("](").skip(1) {
            let Some(target) = piece.split(')').next() else {
                continue;
            };
            let target = target.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !doc_dir.join(target).exists() {
                missing.push(format!(
                    "{doc}:{}: the link `{target}` leads nowhere. Fix: point it at the file that exists now (links are relative to {doc}).",
                    n + 1
                ));
            }
        }
    }
    missing
}

/// The test files tests/README.md must name: every `.rs` file under
/// `tests/` but the guest fixtures, every fixture (a directory of
/// `tests/fixtures/` with its own manifest), every `*tests*.rs` of
/// host/src, and every file of the Rust guest SDK (`guest-sdk/src`, its own
/// workspace, run by scripts/test) that holds a `#[test]`.
pub fn test_files() -> Vec<String> {
    let root = root();
    let fixtures = root.join("tests/fixtures");
    let mut wanted: Vec<String> = (files(&root.join("tests"), ".rs").into_iter())
        .filter(|p| !p.starts_with(&fixtures))
        .map(|p| rel(&p))
        .collect();
    for manifest in ["Cargo.toml", "agenthost.toml"] {
        for path in files(&fixtures, manifest) {
            let dir = path.parent().unwrap_or(&fixtures);
            if dir != fixtures {
                wanted.push(rel(dir));
            }
        }
    }
    wanted.extend(
        (files(&root.join("host/src"), ".rs").into_iter())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains("tests"))
            })
            .map(|p| rel(&p)),
    );
    wanted.extend(
        (files(&root.join("guest-sdk/src"), ".rs").into_iter())
            .filter(|p| std::fs::read_to_string(p).is_ok_and(|code| code.contains("#[test]")))
            .map(|p| rel(&p)),
    );
    wanted.sort();
    wanted
}

#[test]
fn spans_are_paths_only_when_they_look_like_paths() {
    let dir = root();
    assert!(is_path("host/src/api/", &dir));
    assert!(is_path("gone/elsewhere.rs", &dir));
    for not_a_path in [
        "text/event-stream",
        "/sessions/{id}",
        "<data-dir>/master.key",
        "runtime::host",
        "target/guests",
        "ahp_",
    ] {
        assert!(!is_path(not_a_path, &dir), "{not_a_path}");
    }
}
