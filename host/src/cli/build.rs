//! `agenthost build`: builds a project's component as `deploy` would, and
//! writes it to a file instead of uploading it.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::lang;
use crate::build::manifest::Manifest;

/// Builds the project in `dir` and writes its component to `output`
/// (default: `dir/<agent.entry>`, where `deploy --no-build` takes it);
/// returns the path written.
pub fn build(dir: &Path, output: Option<&Path>) -> anyhow::Result<PathBuf> {
    let manifest_path = dir.join("agenthost.toml");
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("cannot read {}", manifest_path.display()))?;
    let manifest = Manifest::parse(&text)?;
    let component = lang::build_component(dir, &manifest)?;
    let output = output.map_or_else(|| dir.join(manifest.agent.entry()), Path::to_path_buf);
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&output, component)
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(output)
}
