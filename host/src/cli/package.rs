//! Building an agent project and packaging it as a deploy bundle (tar.gz).
//!
//! Packaging honours `.gitignore` and `.agentignore` whether or not the
//! directory is a git repository, always leaves `target/` and `.git/` out,
//! and always adds the built component at the path `agent.entry` names.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use flate2::Compression;
use flate2::write::GzEncoder;

const TARGET: &str = "wasm32-wasip2";

/// Makes sure rustup has the wasm32-wasip2 target, installing it when missing.
fn ensure_target() -> anyhow::Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    match installed {
        Ok(out)
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == TARGET) =>
        {
            Ok(())
        }
        Ok(_) => {
            eprintln!("installing the {TARGET} target with rustup");
            let status = Command::new("rustup")
                .args(["target", "add", TARGET])
                .status()?;
            if !status.success() {
                bail!("`rustup target add {TARGET}` failed");
            }
            Ok(())
        }
        // No rustup: let cargo say whether the target is there.
        Err(_) => Ok(()),
    }
}

/// Runs `cargo build --release --target wasm32-wasip2` in `dir` and returns the built component.
pub fn build_component(dir: &Path) -> anyhow::Result<PathBuf> {
    ensure_target()?;
    let manifest_path = dir.join("Cargo.toml").canonicalize()?;
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "--target",
            TARGET,
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(&manifest_path)
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped())
        .output()
        .context("cannot run cargo")?;
    if !output.status.success() {
        bail!("cargo build failed for {}", dir.display());
    }
    let mut found = None;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact"
            || message["manifest_path"].as_str() != manifest_path.to_str()
        {
            continue;
        }
        let wasm = message["filenames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .find(|f| f.ends_with(".wasm"));
        if let Some(wasm) = wasm {
            found = Some(PathBuf::from(wasm));
        }
    }
    found.with_context(|| {
        format!(
            "cargo built no .wasm for {}: is the crate a `cdylib`?",
            dir.display()
        )
    })
}

/// Packages `dir` as a gzipped tar, putting `component` at `entry`.
pub fn package(dir: &Path, entry: &str, component: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    tar.mode(tar::HeaderMode::Deterministic);
    let entry_path = Path::new(entry);
    let walk = ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .add_custom_ignore_filename(".agentignore")
        .filter_entry(|e| {
            let name = e.file_name();
            !(e.depth() == 1 && (name == "target" || name == ".git"))
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
        let bundle = package(root, "hello.wasm", b"\0asm").unwrap();
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
