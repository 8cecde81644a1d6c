//! The Rust names the maps name: every backticked span of ARCHITECTURE.md,
//! CONTRIBUTING.md and tests/README.md that reads as a Rust name (a path
//! with `::`, a call `name()`, a macro `name!`, or an `UpperCamelCase`
//! type) must still be an identifier of the code, so a renamed or removed
//! type cannot linger in a map. A path (`A::b`) must also resolve as one
//! (`resolves`): `Type::member` names a type the code declares and a member
//! its declaring files name, `module::item` walks the source tree, and
//! anything else (a foreign type's call, a log target) must be written so
//! in the code; two words that merely both exist somewhere do not count.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

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
    let code = Code::read();
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
            } else if segments.len() > 1 && !code.resolves(&segments) {
                missing.push(format!(
                    "{doc}:{line}: `{span}` does not resolve as a path: no type of the code declares it as a member, no module of the source tree holds it, and no code writes it. Fix: write the path the code has now (the type or module that owns the item), or drop it."
                ));
            }
        }
    }
    missing
}

/// The Rust files of the repository, to resolve paths against.
struct Code {
    /// Each file with its code (comments and literals blanked).
    files: Vec<(PathBuf, String)>,
    /// Each file's lines that are not comments, literals kept (a log
    /// target is a string).
    raw: Vec<String>,
}

impl Code {
    fn read() -> Code {
        let root = root();
        let mut files_ = Vec::new();
        let mut raw = Vec::new();
        for dir in CODE_DIRS {
            for path in files(&root.join(dir), ".rs") {
                // This test's own examples are no use of a path.
                if path.starts_with(root.join("tests/tidy")) {
                    continue;
                }
                let text = read(&path);
                let lines: Vec<&str> = (text.lines())
                    .filter(|line| !line.trim_start().starts_with("//"))
                    .collect();
                raw.push(lines.join("\n"));
                files_.push((path, code_only(&text)));
            }
        }
        Code { files: files_, raw }
    }

    /// Whether `segments` (two or more) resolve as a path of the code.
    fn resolves(&self, segments: &[&str]) -> bool {
        let written = segments.join("::");
        if self.raw.iter().any(|text| contains_path(text, &written)) {
            return true;
        }
        let segments: Vec<&str> = match segments.first() {
            Some(&"crate" | &"self" | &"super") => segments[1..].to_vec(),
            _ => segments.to_vec(),
        };
        let Some((first, rest)) = segments.split_first() else {
            return true;
        };
        if first.starts_with(|c: char| c.is_ascii_uppercase()) {
            return self.member_of_type(first, rest);
        }
        self.in_module(&segments)
    }

    /// `Type::member`: a file that declares or implements `Type` declares
    /// the member (a method, an associated item, or a variant of the enum).
    fn member_of_type(&self, ty: &str, members: &[&str]) -> bool {
        let [member] = members else {
            return false;
        };
        (self.files.iter())
            .filter(|(_, code)| declares_type(code, ty))
            .any(|(_, code)| declares_item(code, member) || variant_of(code, ty, member))
    }

    /// `module::…::item`: some directory of the source tree holds the
    /// modules in turn, and the last module declares what follows them.
    fn in_module(&self, segments: &[&str]) -> bool {
        let root = root();
        let mut starts: Vec<PathBuf> = (self.files.iter())
            .filter_map(|(path, _)| path.parent().map(Path::to_path_buf))
            .collect();
        starts.sort();
        starts.dedup();
        // A crate's name stands for its `src/`.
        if segments[0] == "agenthost" {
            starts = vec![root.join("host/src")];
        }
        starts.iter().any(|dir| self.walk(dir, segments))
    }

    fn walk(&self, dir: &Path, segments: &[&str]) -> bool {
        let skip_crate = usize::from(segments[0] == "agenthost");
        let mut files_of_module: Vec<PathBuf> = Vec::new();
        let mut dir = dir.to_path_buf();
        let mut taken = skip_crate;
        for segment in &segments[skip_crate..] {
            let file = dir.join(format!("{segment}.rs"));
            let folder = dir.join(segment);
            if folder.is_dir() {
                files_of_module = vec![folder.join("mod.rs"), file];
                dir = folder;
            } else if file.is_file() {
                files_of_module = vec![file];
                dir = dir.join(segment);
            } else {
                break;
            }
            taken += 1;
        }
        if taken == skip_crate {
            return false;
        }
        let Some((item, members)) = segments[taken..].split_first() else {
            return true;
        };
        let code_of = |path: &PathBuf| (self.files.iter()).find(|(p, _)| p == path);
        (files_of_module.iter())
            .filter_map(code_of)
            .any(|(_, code)| {
                declares(code, item) && (members.is_empty() || self.member_of_type(item, members))
            })
    }
}

/// Whether `text` holds `path` as a whole path (not inside a longer one).
fn contains_path(text: &str, path: &str) -> bool {
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + path.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn has_word(code: &str, word: &str) -> bool {
    contains_path(code, word)
}

/// Whether `code` declares `name` (an item) or re-exports it (`use`).
fn declares(code: &str, name: &str) -> bool {
    declares_item(code, name) || re_exported(code, name)
}

/// Whether `code` declares `name` as an item.
fn declares_item(code: &str, name: &str) -> bool {
    let words: Vec<&str> = (code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!')))
        .filter(|w| !w.is_empty())
        .collect();
    let keywords = [
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "const",
        "static",
        "mod",
        "macro_rules!",
    ];
    words
        .windows(2)
        .any(|w| keywords.contains(&w[0]) && w[1] == name)
}

/// Whether `code`'s `enum ty { … }` has the variant `name`.
fn variant_of(code: &str, ty: &str, name: &str) -> bool {
    code.match_indices("enum ").any(|(at, _)| {
        let rest = &code[at + "enum ".len()..];
        let Some(body) = rest.strip_prefix(ty) else {
            return false;
        };
        let Some(open) = body.find('{') else {
            return false;
        };
        let mut depth = 0;
        let mut end = body.len();
        for (i, c) in body[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let head = body[..open].trim();
        (head.is_empty() || head.starts_with('<')) && has_word(&body[open..end], name)
    })
}

/// A multi-line `pub use a::{b, c};` naming `name`.
fn re_exported(code: &str, name: &str) -> bool {
    code.split("use ").skip(1).any(|rest| {
        let statement = rest.split(';').next().unwrap_or("");
        has_word(statement, name)
    })
}

/// Whether `code` declares `ty` (a struct, enum, trait or alias) or
/// implements something for it.
fn declares_type(code: &str, ty: &str) -> bool {
    let words: Vec<&str> = (code.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).any(|w| {
        matches!(w[0], "struct" | "enum" | "trait" | "type" | "impl" | "for") && w[1] == ty
    })
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

#[test]
fn a_path_resolves_only_where_the_code_has_it() {
    let code = Code::read();
    for path in [
        "Op::tickets",
        "Runtime::prepare",
        "journal::encode_record",
        "overload::overloaded",
        "api::endpoints",
        "store::start::SinkSlot",
        "Config::new",
        "agenthost::guest",
    ] {
        let segments: Vec<&str> = path.split("::").collect();
        assert!(code.resolves(&segments), "{path} should resolve");
    }
    // Each word exists somewhere (wasmtime's `Store`, a `fn open`), but not
    // as this path; and a type that is not the journal's.
    for stale in [
        "Store::open",
        "NewEvent::new",
        "store::start::Turns",
        "journal::Turns",
    ] {
        let segments: Vec<&str> = stale.split("::").collect();
        assert!(!code.resolves(&segments), "{stale} should not resolve");
    }
}
