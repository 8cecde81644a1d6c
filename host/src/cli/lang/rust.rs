//! Rust agents: a `cdylib` built by cargo for wasm32-wasip2 (installing the
//! target with rustup when it is missing).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

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
pub(super) fn build(dir: &Path) -> anyhow::Result<Vec<u8>> {
    let built = built_component(dir)?;
    std::fs::read(&built).with_context(|| format!("cannot read {}", built.display()))
}

/// The path of the `.wasm` cargo built for the crate in `dir`.
fn built_component(dir: &Path) -> anyhow::Result<PathBuf> {
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
