//! The documentation index: every page of `docs/` is listed in the
//! README's `## Documentation` section, so a reader finds it from there
//! (a newcomer once found end-users.md, webhooks.md, schedules.md and
//! mcp.md only by listing the folder).

use crate::source::{files, read, rel, root};

/// The pages of `docs/` missing from the README's `## Documentation` list.
pub fn unlisted_pages() -> Vec<String> {
    let readme = read(&root().join("README.md"));
    let index: String = (readme
        .split("\n## ")
        .find(|s| s.starts_with("Documentation\n")))
    .unwrap_or_default()
    .to_string();
    let mut problems = Vec::new();
    if index.is_empty() {
        problems.push("README.md has no `## Documentation` section".to_string());
    }
    for page in files(&root().join("docs"), ".md") {
        let name = rel(&page);
        // Only the top level of docs/: its folders hold pictures and data.
        if name.matches('/').count() != 1 {
            continue;
        }
        if !index.contains(&format!("`{name}`")) {
            problems.push(format!(
                "{name} is not listed in README.md's `## Documentation` section. Fix: add a line `- \\`{name}\\`: <what it covers>.`"
            ));
        }
    }
    problems
}
