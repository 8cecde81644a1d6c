//! Building an agent project's component, one module per `[agent] language`
//! of its manifest. A language adds a variant to `build::manifest::Language`,
//! a module here with its `build`, and an arm in each function below.

mod base_cache;
mod init_limit;
mod python;
mod python_base;
mod python_files;
mod python_snapshot;
mod rust;
mod typescript;
mod typescript_base;
mod typescript_map;
mod typescript_snapshot;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::build::manifest::{Language, Manifest};

/// Builds the component of the project in `dir`. Blocking: it runs the
/// language's toolchain (cargo; componentize-py; esbuild, then the
/// snapshot in-process over a base spliced once by componentize-js), whose
/// output goes to the terminal.
pub(super) fn build_component(dir: &Path, manifest: &Manifest) -> anyhow::Result<Vec<u8>> {
    match manifest.agent.language {
        Language::Rust => rust::build(dir),
        Language::Python => python::build(dir),
        Language::TypeScript => typescript::build(dir),
    }
}

/// Top-level directories of a project that never go into its bundle
/// (besides `target/` and `.git/`, left out for every language).
pub(super) fn always_left_out(language: Language) -> &'static [&'static str] {
    match language {
        Language::Rust => &[],
        Language::Python => python::LEFT_OUT,
        Language::TypeScript => typescript::LEFT_OUT,
    }
}

/// Writes `contents` to `path`, creating its directory.
fn write(path: &Path, contents: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("cannot write {}", path.display()))
}

/// A fresh temporary directory for a `language`'s build, removed on drop.
struct BuildDir(PathBuf);

impl BuildDir {
    fn new(language: &str) -> anyhow::Result<BuildDir> {
        let path = std::env::temp_dir().join(format!(
            "agenthost-{language}-{}",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(BuildDir(path))
    }
}

impl Drop for BuildDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
