//! Building an agent project's component, one module per `[agent] language`
//! of its manifest. A language adds a variant to `build::manifest::Language`,
//! a module here with its `build`, and an arm in each function below.

mod python;
mod python_files;
mod rust;
mod typescript;

use std::path::Path;

use crate::build::manifest::{Language, Manifest};

/// Builds the component of the project in `dir`. Blocking: it runs the
/// language's toolchain (cargo; componentize-py; esbuild and
/// componentize-js), whose output goes to the terminal.
pub fn build_component(dir: &Path, manifest: &Manifest) -> anyhow::Result<Vec<u8>> {
    match manifest.agent.language {
        Language::Rust => rust::build(dir),
        Language::Python => python::build(dir),
        Language::TypeScript => typescript::build(dir),
    }
}

/// Top-level directories of a project that never go into its bundle
/// (besides `target/` and `.git/`, left out for every language).
pub fn always_left_out(language: Language) -> &'static [&'static str] {
    match language {
        Language::Rust => &[],
        Language::Python => python::LEFT_OUT,
        Language::TypeScript => typescript::LEFT_OUT,
    }
}
