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

/// The bundle's map, its sources named as their author knows them.
#[derive(Debug)]
pub(super) struct Named {
    sources: Vec<String>,
    mappings: String,
}

/// Appends the map esbuild wrote at `<bundle>.map` to `bundle`, and returns
/// it. Appending moves no earlier position, so the map stays true.
/// `project` and `sdk` (the SDK's directory, symlinks resolved) name the
/// sources.
pub(super) fn embed(bundle: &Path, project: &Path, sdk: Option<&Path>) -> anyhow::Result<Named> {
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
    std::fs::write(bundle, code).with_context(|| format!("cannot write {}", bundle.display()))?;
    Ok(Named {
        sources,
        mappings: map["mappings"].as_str().unwrap_or_default().to_string(),
    })
}

impl Named {
    /// `text` with every position in the bundle (`<bundle>:LINE:COLUMN`, as
    /// SpiderMonkey names them in an error of the build's snapshot) named
    /// in its source (`agent.ts:LINE:COLUMN`) where the map knows it.
    pub(super) fn rewrite(&self, text: &str, bundle: &str) -> String {
        let needle = format!("{bundle}:");
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(&needle) {
            out.push_str(&rest[..at]);
            let after = &rest[at + needle.len()..];
            let found = position(after).and_then(|(line, column, used)| {
                let (source, line, column) = self.original(line, column)?;
                Some((format!("{source}:{line}:{column}"), used))
            });
            match found {
                Some((named, used)) => {
                    out.push_str(&named);
                    rest = &after[used..];
                }
                None => {
                    out.push_str(&needle);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The source, line and column (1-based) of the bundle's `line` and
    /// `column` (1-based): the last mapping at or before it on its line.
    fn original(&self, line: u64, column: u64) -> Option<(&str, i64, i64)> {
        let (mut source, mut source_line, mut source_column) = (0i64, 0i64, 0i64);
        let mut found = None;
        for (index, segments) in (1u64..).zip(self.mappings.split(';')) {
            if index > line {
                break;
            }
            let mut generated = 0i64;
            for segment in segments.split(',').filter(|s| !s.is_empty()) {
                let mut bytes = segment.bytes().peekable();
                let mut fields = Vec::with_capacity(5);
                while bytes.peek().is_some() {
                    fields.push(vlq::decode(&mut bytes).ok()?);
                }
                generated += fields.first()?;
                if let [_, file, from_line, from_column, ..] = fields[..] {
                    source += file;
                    source_line += from_line;
                    source_column += from_column;
                    if index == line && generated < i64::try_from(column).ok()? {
                        found = Some((source, source_line, source_column));
                    }
                }
            }
        }
        let (source, line, column) = found?;
        let name = self.sources.get(usize::try_from(source).ok()?)?;
        Some((name.as_str(), line + 1, column + 1))
    }
}

/// `LINE:COLUMN` at the start of `text`, and how many bytes they take.
fn position(text: &str) -> Option<(u64, u64, usize)> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let line_len = digits(text);
    let line = text.get(..line_len)?.parse().ok()?;
    let rest = text.get(line_len..)?.strip_prefix(':')?;
    let column_len = digits(rest);
    let column = rest.get(..column_len)?.parse().ok()?;
    Some((line, column, line_len + 1 + column_len))
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
    fn bundle_positions_in_a_text_are_named_in_their_sources() {
        // Line 1: column 0 from agent.ts 1:1, column 4 from 1:5. Line 2:
        // column 2 from lib.ts (source 1) 3:1.
        let map = Named {
            sources: vec!["agent.ts".into(), "lib.ts".into()],
            mappings: "AAAA,IAAI;ECEJ".into(),
        };
        assert_eq!(
            map.rewrite(
                "at agent.js:1:3, agent.js:1:9 and\n  f@agent.js:2:3; agent.js:7:1 agent.js:x",
                "agent.js"
            ),
            "at agent.ts:1:1, agent.ts:1:5 and\n  f@lib.ts:3:1; agent.js:7:1 agent.js:x"
        );
    }

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
