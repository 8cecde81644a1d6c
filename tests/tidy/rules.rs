//! The layering rules, read from the `## Layering` section of
//! ARCHITECTURE.md (one rule per bullet), and their checks over `host/src`.
//! A bullet in that section that is not one of the three forms below fails
//! the test: the document is the rule list, so it must say only rules the
//! test can check.
//!
//! - only `PATH` may name `WORD`
//! - `PATH` may not import `MODULE`, `MODULE`, …
//! - no import loop between the top-level modules of `host/src`
//!
//! Each may be followed by `: ` and an explanation.

use std::collections::{BTreeMap, BTreeSet};

use crate::source::{code_only, crate_imports, files, lines_naming, read, rel, root};

const SECTION: &str = "## Layering";
const NO_LOOP: &str = "no import loop between the top-level modules of `host/src`";

#[derive(Debug)]
pub enum Rule {
    /// Only files under `path` may name `word`.
    OnlyMayName { path: String, word: String },
    /// Files under `path` may not import these top-level modules.
    MayNotImport { path: String, modules: Vec<String> },
    /// The top-level modules of host/src import each other without a loop.
    NoImportLoop,
}

/// The rules in ARCHITECTURE.md, or the bullets it could not read.
pub fn read_rules() -> Result<Vec<(Rule, String)>, Vec<String>> {
    let doc = read(&root().join("ARCHITECTURE.md"));
    let mut lines = doc
        .lines()
        .enumerate()
        .skip_while(|(_, l)| l.trim() != SECTION);
    if lines.next().is_none() {
        return Err(vec![format!(
            "ARCHITECTURE.md has no `{SECTION}` section: the tidy test reads the layering rules from it. Fix: restore the section (one rule per bullet)."
        )]);
    }
    // Bullets, with their continuation lines joined.
    let mut bullets: Vec<(usize, String)> = Vec::new();
    for (n, line) in lines {
        if line.starts_with('#') {
            break;
        }
        if let Some(text) = line.strip_prefix("- ") {
            bullets.push((n + 1, text.trim().to_string()));
        } else if line.starts_with("  ")
            && !line.trim().is_empty()
            && let Some((_, text)) = bullets.last_mut()
        {
            text.push(' ');
            text.push_str(line.trim());
        }
    }
    let (mut rules, mut errors) = (Vec::new(), Vec::new());
    for (line, text) in bullets {
        match parse(&text) {
            Some(rule) => rules.push((rule, text)),
            None => errors.push(format!(
                "ARCHITECTURE.md:{line}: the layering rule \"{text}\" is not one the tidy test can read. Fix: write it as \"only `PATH` may name `WORD`\", \"`PATH` may not import `MODULE`, `MODULE`\" or \"{NO_LOOP}\", optionally followed by \": why\" (tests/tidy/rules.rs)."
            )),
        }
    }
    if rules.is_empty() && errors.is_empty() {
        errors.push(format!(
            "ARCHITECTURE.md: the `{SECTION}` section lists no rule."
        ));
    }
    if errors.is_empty() {
        Ok(rules)
    } else {
        Err(errors)
    }
}

/// A backticked span at the start of `text`, and what follows it.
fn span(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('`')?;
    let end = rest.find('`')?;
    Some((&rest[..end], &rest[end + 1..]))
}

/// The rule's end: nothing, or `: ` and an explanation.
fn ends(rest: &str) -> bool {
    let rest = rest.trim_end_matches('.');
    rest.is_empty() || rest.starts_with(": ")
}

fn parse(text: &str) -> Option<Rule> {
    if let Some(rest) = text.strip_prefix(NO_LOOP) {
        return ends(rest).then_some(Rule::NoImportLoop);
    }
    if let Some(rest) = text.strip_prefix("only ") {
        let (path, rest) = span(rest)?;
        let (word, rest) = span(rest.strip_prefix(" may name ")?)?;
        return ends(rest).then(|| Rule::OnlyMayName {
            path: path.to_string(),
            word: word.to_string(),
        });
    }
    let (path, rest) = span(text)?;
    let mut rest = rest.strip_prefix(" may not import ")?;
    let mut modules = Vec::new();
    loop {
        let (module, after) = span(rest)?;
        modules.push(module.to_string());
        match [", or ", ", ", " or "]
            .iter()
            .find_map(|sep| after.strip_prefix(sep))
        {
            Some(next) => rest = next,
            None if ends(after) => break,
            None => return None,
        }
    }
    Some(Rule::MayNotImport {
        path: path.to_string(),
        modules,
    })
}

/// The library's sources: every `.rs` file under host/src but the binary's
/// `main.rs` (which uses the library as `agenthost::`).
fn host_sources() -> Vec<(String, String)> {
    files(&root().join("host/src"), ".rs")
        .into_iter()
        .map(|path| (rel(&path), code_only(&read(&path))))
        .filter(|(path, _)| path != "host/src/main.rs")
        .collect()
}

fn under(file: &str, path: &str) -> bool {
    file == path || (path.ends_with('/') && file.starts_with(path))
}

/// Every place the code breaks `rule`, each with how to fix it.
pub fn check(rule: &Rule, text: &str) -> Vec<String> {
    let sources = host_sources();
    let mut broken = Vec::new();
    match rule {
        Rule::OnlyMayName { path, word } => {
            if !root().join(path).exists() {
                broken.push(format!(
                    "layering rule \"{text}\" (ARCHITECTURE.md): `{path}` does not exist. Fix: name the file or directory that owns `{word}` now."
                ));
            }
            for (file, code) in sources.iter().filter(|(f, _)| !under(f, path)) {
                for line in lines_naming(code, word) {
                    broken.push(format!(
                        "layering rule \"{text}\" (ARCHITECTURE.md) broken at {file}:{line}: `{word}` is named outside `{path}`. Fix: move the code that needs `{word}` into `{path}` and call it from {file}, or, if the rule no longer holds, change it in ARCHITECTURE.md in the same commit."
                    ));
                }
            }
        }
        Rule::MayNotImport { path, modules } => {
            for (file, code) in sources.iter().filter(|(f, _)| under(f, path)) {
                for (module, line) in crate_imports(code) {
                    if modules.contains(&module) {
                        broken.push(format!(
                            "layering rule \"{text}\" (ARCHITECTURE.md) broken at {file}:{line}: it uses `crate::{module}`. Fix: move what it needs from `{module}` into the module that owns it below `{path}` (or pass it in as plain data); `{module}` sits above it."
                        ));
                    }
                }
            }
        }
        Rule::NoImportLoop => broken.extend(import_loops(&sources)),
    }
    broken
}

/// The top-level module a file of host/src belongs to.
fn top_module(file: &str) -> Option<String> {
    let rest = file.strip_prefix("host/src/")?;
    let first = rest.split('/').next()?;
    Some(first.trim_end_matches(".rs").to_string())
}

/// Every import loop between top-level modules, each as its shortest
/// cycle with the first place each of its edges is made.
fn import_loops(sources: &[(String, String)]) -> Vec<String> {
    let modules: BTreeSet<String> = (sources.iter())
        .filter_map(|(file, _)| top_module(file))
        .filter(|m| m != "lib")
        .collect();
    // edge (from, to) → the first file:line making it
    let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
    for (file, code) in sources {
        let Some(from) = top_module(file).filter(|m| modules.contains(m)) else {
            continue;
        };
        for (to, line) in crate_imports(code) {
            if to != from && modules.contains(&to) {
                edges
                    .entry((from.clone(), to))
                    .or_insert(format!("{file}:{line}"));
            }
        }
    }
    let mut cycles: BTreeSet<Vec<String>> = BTreeSet::new();
    for start in &modules {
        if let Some(cycle) = shortest_cycle(start, &edges) {
            // The same cycle found from each of its modules: start it at its least.
            let least = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
            let mut rotated = cycle[least..].to_vec();
            rotated.extend_from_slice(&cycle[..least]);
            cycles.insert(rotated);
        }
    }
    let edges_of = |cycle: &Vec<String>| -> BTreeSet<(String, String)> {
        (0..cycle.len())
            .map(|i| (cycle[i].clone(), cycle[(i + 1) % cycle.len()].clone()))
            .collect()
    };
    // An edge in every loop is the likely culprit: say so first.
    let mut shared: Option<BTreeSet<(String, String)>> = None;
    for cycle in &cycles {
        let these = edges_of(cycle);
        shared = Some(match shared {
            None => these,
            Some(so_far) => so_far.intersection(&these).cloned().collect(),
        });
    }
    let mut problems = Vec::new();
    if cycles.len() > 1 {
        for (a, b) in shared.unwrap_or_default() {
            let at = edges
                .get(&(a.clone(), b.clone()))
                .map_or("?", String::as_str);
            problems.push(format!(
                "layering rule \"{NO_LOOP}\" (ARCHITECTURE.md) broken: every loop below goes through `{a}` using `{b}` at {at}; that use is most likely the one to move."
            ));
        }
    }
    problems.extend((cycles.into_iter())
        .map(|cycle| {
            let steps: Vec<String> = (0..cycle.len())
                .map(|i| {
                    let (a, b) = (&cycle[i], &cycle[(i + 1) % cycle.len()]);
                    let at = edges.get(&(a.clone(), b.clone())).map_or("?", String::as_str);
                    format!("`{a}` uses `{b}` at {at}")
                })
                .collect();
            let path: Vec<&str> = cycle.iter().chain(cycle.first()).map(String::as_str).collect();
            format!(
                "layering rule \"{NO_LOOP}\" (ARCHITECTURE.md) broken: {}. {}. Fix: the module that sits lower in ARCHITECTURE.md's `## Layering` order must not use the higher one: move the item it uses into the module that owns it (the lower one, or one below both), so every edge goes one way.",
                path.join(" → "),
                steps.join("; ")
            )
        }));
    problems
}

/// The shortest cycle through `start` (breadth first), without repeating `start`.
fn shortest_cycle(
    start: &String,
    edges: &BTreeMap<(String, String), String>,
) -> Option<Vec<String>> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(m) = queue.pop_front() {
        for (a, b) in edges.keys() {
            if *a != m {
                continue;
            }
            if b == start {
                let mut cycle = vec![m.clone()];
                while let Some(p) = parent.get(cycle.last()?) {
                    cycle.push(p.clone());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !parent.contains_key(b) {
                parent.insert(b.clone(), m.clone());
                queue.push_back(b.clone());
            }
        }
    }
    None
}

#[test]
fn rules_read_as_written() {
    assert!(matches!(parse(NO_LOOP), Some(Rule::NoImportLoop)));
    assert!(matches!(
        parse("only `host/src/api/` may name `axum`: the HTTP layer"),
        Some(Rule::OnlyMayName { path, word }) if path == "host/src/api/" && word == "axum"
    ));
    assert!(matches!(
        parse("`host/src/store/domain/` may not import `api`, `runtime` or `build`"),
        Some(Rule::MayNotImport { modules, .. }) if modules == ["api", "runtime", "build"]
    ));
    assert!(parse("only `host/src/api/` may name `axum` and `hyper`").is_none());
    assert!(parse("the API is nice").is_none());
}
