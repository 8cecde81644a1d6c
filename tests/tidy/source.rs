//! Reading the repository's Rust sources as the tidy rules need them: the
//! files under a directory, their code with comments and literals blanked
//! out (so a word in a doc comment or a string is not a use), the words a
//! file names, and the top-level modules of `host/src` it imports.

use std::path::{Path, PathBuf};

/// Directories never walked: build output, installed packages, tools' state.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "venv", "__pycache__"];

/// The repository's root (the parent of `host/`).
pub fn root() -> PathBuf {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    host.parent().unwrap_or(host).to_path_buf()
}

/// A path relative to the root, with `/` separators, for messages.
pub fn rel(path: &Path) -> String {
    let root = root();
    let rel = path.strip_prefix(&root).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

/// Every file under `dir` whose name ends with `suffix`, sorted; build
/// output, installed packages and hidden directories are left out.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if name.ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `src` with every comment and every string and character literal
/// replaced by spaces, newlines kept (so line numbers stay true).
pub fn code_only(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, from: &[char]| {
        out.extend(from.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let at = |k: usize| chars.get(i + k).copied();
        // An identifier character before an `r` makes it part of a name,
        // unless it is the `b` of `br"…"`.
        let ident_before = i > 0
            && is_ident(chars[i - 1])
            && !(chars[i - 1] == 'b' && (i < 2 || !is_ident(chars[i - 2])));
        let end = if c == '/' && at(1) == Some('/') {
            // A line comment, doc comments included.
            (i..chars.len())
                .find(|&k| chars[k] == '\n')
                .unwrap_or(chars.len())
        } else if c == '/' && at(1) == Some('*') {
            // A block comment; they nest.
            let (mut depth, mut k) = (0usize, i);
            while k < chars.len() {
                if chars[k] == '/' && chars.get(k + 1) == Some(&'*') {
                    depth += 1;
                    k += 2;
                } else if chars[k] == '*' && chars.get(k + 1) == Some(&'/') {
                    depth -= 1;
                    k += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    k += 1;
                }
            }
            k
        } else if c == 'r' && !ident_before && raw_string_hashes(&chars[i + 1..]).is_some() {
            // r"…", r#"…"#: ends at the quote followed by as many hashes.
            let hashes = raw_string_hashes(&chars[i + 1..]).unwrap_or(0);
            let mut k = i + 2 + hashes;
            while k < chars.len() {
                if chars[k] == '"' && (1..=hashes).all(|h| chars.get(k + h) == Some(&'#')) {
                    break;
                }
                k += 1;
            }
            (k + 1 + hashes).min(chars.len())
        } else if c == '"' {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            (k + 1).min(chars.len())
        } else if c == '\'' && at(1) == Some('\\') {
            // '\n', '\'', '\u{..}'
            let mut k = i + 2;
            while k < chars.len() && chars[k] != '\'' {
                k += 1;
            }
            (k + 1).min(chars.len())
        } else if c == '\'' && at(2) == Some('\'') {
            i + 3
        } else {
            // Code (a lifetime's quote included).
            out.push(c);
            i += 1;
            continue;
        };
        blank(&mut out, &chars[i..end]);
        i = end;
    }
    out
}

/// After an `r`: the number of `#` before a `"` if a raw string starts here.
fn raw_string_hashes(rest: &[char]) -> Option<usize> {
    let hashes = rest.iter().take_while(|&&c| c == '#').count();
    (rest.get(hashes) == Some(&'"')).then_some(hashes)
}

/// The 1-based lines of `code` where `word` occurs as a whole word (no
/// identifier character on either side of it).
pub fn lines_naming(code: &str, word: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (start, _) in code.match_indices(word) {
        let before = code[..start].chars().next_back();
        let after = code[start + word.len()..].chars().next();
        let starts_ident = word.chars().next().is_some_and(is_ident);
        let ends_ident = word.chars().next_back().is_some_and(is_ident);
        if (starts_ident && before.is_some_and(is_ident))
            || (ends_ident && after.is_some_and(is_ident))
        {
            continue;
        }
        lines.push(line_of(code, start));
    }
    lines
}

fn line_of(code: &str, offset: usize) -> usize {
    code[..offset].matches('\n').count() + 1
}

/// The first segment of every `crate::…` path in `code` (a `use` or a path
/// in an expression), with its line: `crate::{a::X, b}` gives `a` and `b`.
pub fn crate_imports(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (start, _) in code.match_indices("crate") {
        if code[..start].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = code[start + "crate".len()..].trim_start();
        let Some(rest) = rest.strip_prefix("::") else {
            continue;
        };
        let rest = rest.trim_start();
        let line = line_of(code, start);
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                let name: String = item
                    .trim_start()
                    .chars()
                    .take_while(|&c| is_ident(c))
                    .collect();
                if !name.is_empty() && name != "self" {
                    found.push((name, line));
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.push((name, line));
            }
        }
    }
    found
}

/// The comma-separated items of a `{…}` group (`group` starts after its
/// `{`), nested groups kept whole.
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

#[test]
fn the_reader_sees_code_not_comments_or_literals() {
    let src = "use axum::X; // axum\nlet s = \"axum\"; let r = r#\"axum\"#;\n/* axum /* axum */ */ let c = 'a'; fn f<'a>(x: &'a str) {}\n";
    let code = code_only(src);
    assert_eq!(lines_naming(&code, "axum"), vec![1]);
    assert_eq!(code.lines().count(), src.lines().count());
    assert!(code.contains("fn f<'a>(x: &'a str)"));
    assert!(lines_naming("let c = PoolingAllocationConfig::new();", "Config::new").is_empty());
    assert_eq!(
        lines_naming("wasmtime::Config::new()", "Config::new"),
        vec![1]
    );
    let imports =
        crate_imports("use crate::{api::{self, X}, build::Y};\nlet x = crate::store::f();");
    let names: Vec<_> = imports.iter().map(|(n, l)| (n.as_str(), *l)).collect();
    assert_eq!(names, vec![("api", 1), ("build", 1), ("store", 2)]);
}
