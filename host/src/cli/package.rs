//! Packaging an agent project as a deploy bundle (tar.gz).
//!
//! Packaging honours `.gitignore` and `.agentignore` whether or not the
//! directory is a git repository, always leaves `target/` and `.git/` out
//! (and what the project's language adds, `lang::always_left_out`), and
//! always adds the built component at the path `agent.entry` names.

use std::path::Path;

use anyhow::Context;
use flate2::Compression;
use flate2::write::GzEncoder;

/// Packages `dir` as a gzipped tar, putting `component` at `entry` and
/// leaving out the top-level directories `skip` names (besides `target`
/// and `.git`).
pub(super) fn package(
    dir: &Path,
    entry: &str,
    component: &[u8],
    skip: &'static [&'static str],
) -> anyhow::Result<Vec<u8>> {
    // The fastest level: a 12 MB component takes ~0.3 s instead of ~1 s at
    // the default, for a bundle ~15% larger (docs/benchmarks-history.md, "A changed
    // TypeScript agent, end to end").
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    tar.mode(tar::HeaderMode::Deterministic);
    let entry_path = Path::new(entry);
    let walk = ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .add_custom_ignore_filename(".agentignore")
        .filter_entry(move |e| {
            let name = e.file_name();
            !(e.depth() == 1
                && (name == "target" || name == ".git" || skip.iter().any(|s| name == *s)))
        })
        .build();
    for item in walk {
        let item = item?;
        if !item.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let relative = item.path().strip_prefix(dir)?;
        if relative == entry_path {
            continue;
        }
        tar.append_path_with_name(item.path(), relative)
            .with_context(|| format!("cannot add {}", relative.display()))?;
    }
    let mut header = tar::Header::new_gnu();
    header.set_size(component.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, entry_path, component)?;
    Ok(tar.into_inner()?.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::io::Read;

    fn names(bundle: &[u8]) -> BTreeSet<String> {
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bundle));
        archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn honours_ignore_files_and_always_adds_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "target/\n*.log\nhello.wasm\n").unwrap();
        std::fs::write(root.join(".agentignore"), "secret.txt\n").unwrap();
        std::fs::write(root.join("agenthost.toml"), "x").unwrap();
        std::fs::write(root.join("debug.log"), "x").unwrap();
        std::fs::write(root.join("secret.txt"), "x").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "x").unwrap();
        std::fs::create_dir_all(root.join("target/release")).unwrap();
        std::fs::write(root.join("target/release/big"), "x").unwrap();
        std::fs::create_dir_all(root.join(".venv/lib")).unwrap();
        std::fs::write(root.join(".venv/lib/big.py"), "x").unwrap();
        let bundle = package(root, "hello.wasm", b"\0asm", &[".venv"]).unwrap();
        let got = names(&bundle);
        let want: BTreeSet<String> = [
            ".agentignore",
            ".gitignore",
            "agenthost.toml",
            "src/lib.rs",
            "hello.wasm",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(got, want);
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bundle[..]));
        for e in archive.entries().unwrap() {
            let mut e = e.unwrap();
            if e.path().unwrap().to_str() == Some("hello.wasm") {
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                assert_eq!(data, b"\0asm");
            }
        }
    }
}
