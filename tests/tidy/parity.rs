//! The parity table: docs/agents.md's "three SDKs, point by point" is
//! rendered from `tests/sdk/parity.toml`, whose scenarios the e2e suite
//! runs in every language (`tests/e2e/parity.rs`); the two must not drift,
//! and every point's `checked_by` must name scenarios that exist.

use serde::Deserialize;

use crate::source::{read, root};

const BEGIN: &str = "<!-- The table below is generated from tests/sdk/parity.toml by the tidy test (tests/tidy/parity.rs): edit that file, then run `UPDATE_DOCS=1 cargo test -p agenthost --test tidy`. -->";
const END: &str = "<!-- End of the generated table. -->";

#[derive(Deserialize)]
struct Table {
    point: Vec<Point>,
    scenario: Vec<Scenario>,
}

#[derive(Deserialize)]
struct Point {
    point: String,
    rust: String,
    python: String,
    typescript: String,
    checked_by: Vec<String>,
}

#[derive(Deserialize)]
struct Scenario {
    name: String,
}

/// The Markdown table of the points.
fn render(table: &Table) -> String {
    let mut out = String::from(
        "| Point | Rust (`agenthost-sdk`) | Python (`agenthost`) | TypeScript (`@agenthost/sdk`) | Checked by |\n|---|---|---|---|---|\n",
    );
    for p in &table.point {
        let checked: Vec<String> = p.checked_by.iter().map(|s| format!("`{s}`")).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            p.point,
            p.rust,
            p.python,
            p.typescript,
            checked.join(", ")
        ));
    }
    out
}

/// The problems: a table in docs/agents.md other than the rendered one
/// (rewritten instead with `UPDATE_DOCS=1`), a `checked_by` naming no
/// scenario, a scenario no point names.
pub fn problems() -> Vec<String> {
    let source = root().join("tests/sdk/parity.toml");
    let table: Table = match toml::from_str(&read(&source)) {
        Ok(table) => table,
        Err(e) => return vec![format!("tests/sdk/parity.toml does not parse: {e}")],
    };
    let mut problems = Vec::new();
    let names: Vec<&str> = table.scenario.iter().map(|s| s.name.as_str()).collect();
    for p in &table.point {
        for s in &p.checked_by {
            if !names.contains(&s.as_str()) {
                problems.push(format!(
                    "tests/sdk/parity.toml: the point `{}` is checked by `{s}`, which is no [[scenario]]. Fix: name a scenario of the file, or add it.",
                    p.point
                ));
            }
        }
    }
    for name in &names {
        if !table
            .point
            .iter()
            .any(|p| p.checked_by.iter().any(|s| s == name))
        {
            problems.push(format!(
                "tests/sdk/parity.toml: no point names the scenario `{name}` in `checked_by`. Fix: name it in the rows it checks."
            ));
        }
    }
    let doc_path = root().join("docs/agents.md");
    let doc = read(&doc_path);
    let (Some(begin), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
        problems.push(format!(
            "docs/agents.md lacks the markers of the generated parity table. Fix: put `{BEGIN}` and `{END}` around it."
        ));
        return problems;
    };
    let body_start = begin + BEGIN.len() + 1;
    let rendered = render(&table);
    if doc.get(body_start..end) != Some(rendered.as_str()) {
        if std::env::var_os("UPDATE_DOCS").is_some() {
            let updated = format!("{}{rendered}{}", &doc[..body_start], &doc[end..]);
            if let Err(e) = std::fs::write(&doc_path, updated) {
                problems.push(format!("writing docs/agents.md: {e}"));
            }
        } else {
            problems.push(
                "docs/agents.md's parity table differs from tests/sdk/parity.toml. Fix: edit the TOML (the table is generated), then run `UPDATE_DOCS=1 cargo test -p agenthost --test tidy`.".into(),
            );
        }
    }
    problems
}
