//! The tidy test: cheap checks that the code keeps the shape the maps
//! describe (rust-analyzer's `xtask/src/tidy.rs` is the model). Run by
//! `cargo test --workspace`, so by `scripts/test`; alone with
//! `cargo test -p agenthost --test tidy`. What it checks is listed in
//! ARCHITECTURE.md (`## Layering`, read from there) and tests/README.md.

// A test or bench crate has no public face: `pub` here means "shared
// between its modules" (`unreachable_pub` is for libraries, root Cargo.toml).
#![allow(unreachable_pub)]

mod budget;
mod docs;
mod index;
mod links;
mod names;
mod parity;
mod rules;
mod source;

use source::{files, read, rel, root};

fn fail_if_any(what: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s)\n\n{}\n",
        problems.len(),
        problems.join("\n\n")
    );
}

/// Every Rust file of the host, the workspace's other crates, the SDK, the
/// examples and the tests opens
/// with a `//!` line saying what it owns.
#[test]
fn every_rust_file_opens_with_a_doc_line() {
    let root = root();
    let mut problems = Vec::new();
    for dir in ["host", "crates", "guest-sdk", "examples", "tests"] {
        for path in files(&root.join(dir), ".rs") {
            let text = read(&path);
            if !text.lines().next().is_some_and(|l| l.starts_with("//!")) {
                problems.push(format!(
                    "{}: the file does not open with a `//!` line. Fix: make its first line `//! <what this file owns>` (CONTRIBUTING.md).",
                    rel(&path)
                ));
            }
        }
    }
    fail_if_any("files without their `//!` line", problems);
}

/// Every page of `docs/` is listed in the README's documentation index.
#[test]
fn every_docs_page_is_in_the_readme_index() {
    fail_if_any(
        "docs pages the README does not list",
        index::unlisted_pages(),
    );
}

#[test]
fn the_dependency_count_is_within_its_budget() {
    fail_if_any("the dependency budget", budget::over_budget());
}

/// Every path ARCHITECTURE.md, CONTRIBUTING.md and tests/README.md name
/// exists.
#[test]
fn every_path_the_maps_name_exists() {
    let problems = docs::MAPS
        .iter()
        .flat_map(|doc| docs::missing_paths(doc))
        .collect();
    fail_if_any("paths named in the maps that do not exist", problems);
}

/// Every Rust name (a type, a `module::path`, a `call()`) those maps name
/// is still in the code.
#[test]
fn every_rust_name_the_maps_name_exists() {
    fail_if_any(
        "Rust names in the maps that the code does not have",
        names::missing_names(docs::MAPS),
    );
}

/// Every relative link of every Markdown document leads to a file, and a
/// `#fragment` to a heading of it.
#[test]
fn every_link_of_the_documents_resolves() {
    fail_if_any("dead links in the documents", links::all_dead_links());
}

/// docs/agents.md's parity table is the one `tests/sdk/parity.toml`
/// renders, and its points name scenarios that exist.
#[test]
fn the_parity_table_is_generated_from_the_scenarios() {
    fail_if_any("the SDK parity table", parity::problems());
}

/// ARCHITECTURE.md stays a map one reads in a sitting, not an inventory.
#[test]
fn the_map_stays_short() {
    const MAX_LINES: usize = 300;
    let lines = read(&root().join("ARCHITECTURE.md")).lines().count();
    let problems = (lines > MAX_LINES)
        .then(|| format!(
            "ARCHITECTURE.md has {lines} lines, more than {MAX_LINES}. Fix: say less per module (one sentence each), and move numbers to docs/ and test lists to tests/README.md."
        ))
        .into_iter()
        .collect();
    fail_if_any("the map", problems);
}

/// ARCHITECTURE.md stays short by saying less, not by longer lines.
#[test]
fn the_maps_lines_stay_short() {
    const MAX_CHARS: usize = 100;
    let problems = (read(&root().join("ARCHITECTURE.md")).lines().enumerate())
        .filter(|(_, line)| line.chars().count() > MAX_CHARS)
        .map(|(n, line)| format!(
            "ARCHITECTURE.md:{}: {} characters, more than {MAX_CHARS}. Fix: wrap it, or say less: name the folder or entry file and let that file's `//!` carry the detail.",
            n + 1,
            line.chars().count()
        ))
        .collect();
    fail_if_any("long lines of the map", problems);
}

/// tests/README.md names every test file, fixture and host test module.
#[test]
fn the_test_catalogue_names_every_test_file() {
    let catalogue = read(&root().join("tests/README.md"));
    let problems = (docs::test_files().into_iter())
        .filter(|path| !catalogue.contains(&format!("`{path}`")))
        .map(|path| format!(
            "tests/README.md does not name `{path}`. Fix: add one line for it, in backticks, under its heading (what it tests)."
        ))
        .collect();
    fail_if_any("test files missing from tests/README.md", problems);
}

/// The layering rules of ARCHITECTURE.md hold in host/src.
#[test]
fn the_layering_rules_hold() {
    let rules = match rules::read_rules() {
        Ok(rules) => rules,
        Err(problems) => return fail_if_any("unreadable layering rules", problems),
    };
    let problems = (rules.iter())
        .flat_map(|(rule, text)| rules::check(rule, text))
        .collect();
    fail_if_any("broken layering rules", problems);
}
