//! The documents' links: every relative Markdown link of the repository's
//! documents leads to a file that exists, and a link with a `#fragment` to
//! a heading of that file (GitHub's anchors), so moving a section or
//! splitting a page cannot leave a dead link behind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::docs::prose;
use crate::source::{files, read, rel, root};

/// The Markdown files whose links are checked: every `.md` of the
/// repository outside build output and installed packages.
fn documents() -> Vec<PathBuf> {
    files(&root(), ".md")
}

/// The targets of `prose`'s inline links `[text](target)`, each with its
/// line; images and reference-style links included, angle brackets and
/// titles dropped.
pub fn link_targets(prose: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            let target = after[..end].trim();
            let target = target.split_whitespace().next().unwrap_or_default();
            let target = target.trim_start_matches('<').trim_end_matches('>');
            found.push((n + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading's text: lower case, letters, digits, `-`
/// and `_` kept, spaces made `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    let text = heading.replace('`', "");
    (text.trim().to_lowercase().chars())
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown text: its headings' slugs, a repeated one
/// numbered `-1`, `-2`… as GitHub does, plus explicit `<a id="…">` and
/// `<a name="…">` anchors.
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = Vec::new();
    for line in prose(text).lines() {
        let trimmed = line.trim_start();
        if let Some(heading) = trimmed.strip_prefix('#') {
            let heading = heading.trim_start_matches('#');
            if heading.starts_with(' ') {
                let base = slug(heading);
                let count = seen.entry(base.clone()).or_insert(0);
                anchors.push(match *count {
                    0 => base.clone(),
                    n => format!("{base}-{n}"),
                });
                *count += 1;
            }
        }
        for marker in ["<a id=\"", "<a name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(marker) {
                let after = &rest[at + marker.len()..];
                if let Some(end) = after.find('"') {
                    anchors.push(after[..end].to_string());
                }
                rest = after;
            }
        }
    }
    anchors
}

/// Whether a link leaves the repository (a scheme, or a site-relative path).
fn is_external(target: &str) -> bool {
    target.contains("://")
        || target.starts_with("mailto:")
        || target.starts_with('/')
        || target.is_empty()
}

/// Every dead relative link of `doc`, as `doc:line: …`.
fn dead_links(doc: &Path) -> Vec<String> {
    let text = read(doc);
    let dir = doc.parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (line, target) in link_targets(&prose(&text)) {
        if is_external(&target) {
            continue;
        }
        let (path, fragment) = match target.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (target.as_str(), None),
        };
        let file = if path.is_empty() {
            doc.to_path_buf()
        } else {
            dir.join(path)
        };
        if !file.exists() {
            problems.push(format!(
                "{}:{line}: the link `{target}` leads to no file. Fix: point it at the page's new path.",
                rel(doc)
            ));
            continue;
        }
        let Some(fragment) = fragment else {
            continue;
        };
        if file.extension().is_some_and(|e| e == "md")
            && !anchors(&read(&file)).iter().any(|a| a == fragment)
        {
            problems.push(format!(
                "{}:{line}: the link `{target}` names no heading of {}. Fix: use the anchor of the heading it means (lower case, spaces as `-`, punctuation dropped).",
                rel(doc),
                rel(&file)
            ));
        }
    }
    problems
}

/// Every dead relative link of every document.
pub fn all_dead_links() -> Vec<String> {
    documents().iter().flat_map(|doc| dead_links(doc)).collect()
}

#[test]
fn anchors_are_githubs() {
    let text = "# Writing an agent\n## The model loop: `ChatLoop`\n## Tools\n## Tools\n```\n# not a heading\n```\n";
    assert_eq!(
        anchors(text),
        [
            "writing-an-agent",
            "the-model-loop-chatloop",
            "tools",
            "tools-1"
        ]
    );
    assert_eq!(slug("429 retries"), "429-retries");
    assert_eq!(
        slug("The three SDKs, point by point"),
        "the-three-sdks-point-by-point"
    );
}

#[test]
fn link_targets_are_read_from_prose() {
    let prose = "See [a](b.md#c) and [d](https://e) and ![f](g.png \"t\").";
    let targets: Vec<String> = link_targets(prose).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["b.md#c", "https://e", "g.png"]);
}
