//! The source map a TypeScript agent carries: esbuild writes the bundle's
//! map beside it, and this appends it to the bundle, as
//! `globalThis.__agenthostSourceMap = {"sources", "mappings"}`, with each
//! source named as its author knows it (`agent.ts`, `@agenthost/sdk/src/...`).
//! SpiderMonkey names only bundle positions in a stack; the SDK maps them
//! back with this when an exception ends a turn.

use std::path::{Component, Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

/// The global the SDK reads the map from (`guest-sdk/typescript/src/stack.ts`).
const GLOBAL: &str = "__agenthostSourceMap";

/// Appends the map esbuild wrote at `<bundle>.map` to `bundle`. Appending
/// moves no earlier position, so the map stays true. `project` and `sdk`
/// (the SDK's directory, symlinks resolved) name the sources.
pub(super) fn embed(bundle: &Path, project: &Path, sdk: Option<&Path>) -> anyhow::Result<()> {
    let map_path = bundle.with_extension("js.map");
    let text = std::fs::read_to_string(&map_path)
        .with_context(|| format!("esbuild wrote no source map at {}", map_path.display()))?;
    let map: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", map_path.display()))?;
    let base = bundle.parent().unwrap_or(Path::new("."));
    let sources: Vec<String> = map["sources"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|s| display_name(&base.join(s.as_str().unwrap_or("")), project, sdk))
        .collect();
    let embedded = json!({"sources": sources, "mappings": map["mappings"]});
    let mut code = std::fs::read_to_string(bundle)
        .with_context(|| format!("cannot read {}", bundle.display()))?;
    code.push_str(&format!("\nglobalThis.{GLOBAL} = {embedded};\n"));
    std::fs::write(bundle, code).with_context(|| format!("cannot write {}", bundle.display()))
}

/// A source as the author knows it: relative to the project, the SDK's
/// files under `@agenthost/sdk/`, a package's under its name, else its path.
fn display_name(path: &Path, project: &Path, sdk: Option<&Path>) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| normalize(path));
    if let Ok(inside) = path.strip_prefix(project) {
        return slashes(inside);
    }
    if let Some(inside) = sdk.and_then(|sdk| path.strip_prefix(sdk).ok()) {
        return format!("@agenthost/sdk/{}", slashes(inside));
    }
    let text = slashes(&path);
    match text.rfind("/node_modules/") {
        Some(at) => text[at + "/node_modules/".len()..].to_string(),
        None => text,
    }
}

/// `path` without `.` and `..` (for a source that no longer exists).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn slashes(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_named_as_their_author_knows_them() {
        let project = Path::new("/home/me/shop");
        let sdk = Path::new("/opt/agenthost/guest-sdk/typescript");
        let name = |p: &str| display_name(Path::new(p), project, Some(sdk));
        assert_eq!(name("/home/me/shop/agent.ts"), "agent.ts");
        assert_eq!(name("/tmp/build/../../home/me/shop/lib/x.ts"), "lib/x.ts");
        assert_eq!(
            name("/opt/agenthost/guest-sdk/typescript/src/export.ts"),
            "@agenthost/sdk/src/export.ts"
        );
        assert_eq!(
            name("/home/me/shop/../node_modules/zod/lib/index.js"),
            "zod/lib/index.js"
        );
        assert_eq!(name("/elsewhere/x.js"), "/elsewhere/x.js");
    }

    #[test]
    fn the_map_is_appended_as_a_global_with_named_sources() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        std::fs::write(project.join("agent.ts"), "throw 1;\n").unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let bundle = work.join("agent.js");
        std::fs::write(&bundle, "throw 1;\n").unwrap();
        let map = json!({"version": 3, "sources": ["../project/agent.ts"], "mappings": "AAAA"});
        std::fs::write(work.join("agent.js.map"), map.to_string()).unwrap();
        let project = project.canonicalize().unwrap();
        embed(&bundle, &project, None).unwrap();
        let code = std::fs::read_to_string(&bundle).unwrap();
        assert_eq!(
            code,
            "throw 1;\n\nglobalThis.__agenthostSourceMap = {\"mappings\":\"AAAA\",\"sources\":[\"agent.ts\"]};\n"
        );
    }
}
