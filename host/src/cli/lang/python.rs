//! Python agents: the project's `app.py` (with the modules beside it) and
//! the SDK embedded in this binary, built into a component in two
//! snapshots: componentize-py makes a base once (`python_base`, cached per
//! componentize-py version and SDK), then every build snapshots that base
//! again with the app imported, in this process (`python_snapshot`), in a
//! second or two instead of componentize-py's many seconds.
//!
//! componentize-py is found, in order: `$AGENTHOST_COMPONENTIZE_PY`, the
//! project's venv (`.venv/` or `venv/`), the active venv (`$VIRTUAL_ENV`),
//! then `PATH`; every build asks it its version (the base's key). The venv
//! it was found in gives its site-packages to the app, as componentize-py
//! itself would.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use super::python_base;
use super::python_snapshot::{self, Mounts};

/// The componentize-py version the SDK is built and tested with.
pub(super) const COMPONENTIZE_PY_VERSION: &str = "0.25.1";

/// The environment variable that names componentize-py explicitly.
const COMPONENTIZE_PY_VAR: &str = "AGENTHOST_COMPONENTIZE_PY";

/// A project's directories that never go into its bundle.
pub(super) const LEFT_OUT: &[&str] = &[".venv", "venv", "__pycache__"];

/// Builds the Python agent in `dir` and returns the component.
pub(super) fn build(dir: &Path) -> anyhow::Result<Vec<u8>> {
    if !dir.join("app.py").is_file() && !dir.join("app/__init__.py").is_file() {
        bail!(
            "{} is a Python agent (`[agent] language = \"python\"`) without its code: \
             write the agent in {}",
            dir.display(),
            dir.join("app.py").display()
        );
    }
    let tool = find_componentize_py(dir)?;
    let started = std::time::Instant::now();
    let version = check_version(&tool.path);
    let base = python_base::ensure(&tool.path, &version)?;
    tracing::debug!(elapsed = ?started.elapsed(), base = %base.dir.display(), "python build: base ready");
    let project = dir
        .canonicalize()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    let mounts = Mounts {
        project,
        sdk: base.sdk(),
        // componentize-py adds the venv's site-packages: its pure-Python packages go in.
        site_packages: tool.venv.as_deref().and_then(site_packages),
        staged: base.staged(),
    };
    python_snapshot::snapshot(&base.component(), &base.dir, mounts)
        .with_context(|| format!("cannot build the Python agent {}", dir.display()))
}

/// The venv's `lib/python3.*/site-packages`, as componentize-py finds it.
fn site_packages(venv: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("site-packages")))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found.pop()
}

/// componentize-py, and the venv it was found in.
#[derive(Debug, PartialEq)]
struct Tool {
    path: PathBuf,
    venv: Option<PathBuf>,
}

fn find_componentize_py(dir: &Path) -> anyhow::Result<Tool> {
    let explicit = std::env::var_os(COMPONENTIZE_PY_VAR).filter(|v| !v.is_empty());
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    let active = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty());
    find(
        dir,
        explicit.map(PathBuf::from),
        active.map(PathBuf::from),
        &path_var,
    )
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The search behind `find_componentize_py`, from explicit inputs.
fn find(
    dir: &Path,
    explicit: Option<PathBuf>,
    active_venv: Option<PathBuf>,
    path_var: &std::ffi::OsStr,
) -> anyhow::Result<Tool> {
    if let Some(path) = explicit {
        if is_executable(&path) {
            return Ok(Tool { path, venv: None });
        }
        bail!(
            "{COMPONENTIZE_PY_VAR} is {}, which is not an executable file: point it at \
             componentize-py (for example .venv/bin/componentize-py), or unset it",
            path.display()
        );
    }
    let venvs = [dir.join(".venv"), dir.join("venv")]
        .into_iter()
        .chain(active_venv);
    for venv in venvs {
        let path = venv.join("bin").join("componentize-py");
        if is_executable(&path) {
            return Ok(Tool {
                path,
                venv: Some(venv),
            });
        }
    }
    for entry in std::env::split_paths(path_var) {
        let path = entry.join("componentize-py");
        if is_executable(&path) {
            return Ok(Tool { path, venv: None });
        }
    }
    bail!(
        "componentize-py was not found: a Python agent is built with componentize-py \
         {COMPONENTIZE_PY_VERSION}, looked for in ${COMPONENTIZE_PY_VAR}, {dir}/.venv, {dir}/venv, \
         the active venv and PATH. Install it into the project's venv:\n\n    \
         python3 -m venv {dir}/.venv && {dir}/.venv/bin/pip install componentize-py=={COMPONENTIZE_PY_VERSION}\n\n\
         or anywhere on PATH (`pip install componentize-py=={COMPONENTIZE_PY_VERSION}`), \
         or set {COMPONENTIZE_PY_VAR} to its path.",
        dir = dir.display()
    )
}

/// What componentize-py says its version is; a warning when it is not the
/// version the SDK is tested with.
fn check_version(path: &Path) -> String {
    let found = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    if !found.ends_with(COMPONENTIZE_PY_VERSION) {
        eprintln!(
            "warning: {} says `{found}`; the Python SDK is built and tested with componentize-py \
             {COMPONENTIZE_PY_VERSION}",
            path.display()
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::lang::python_files::FILES;
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn componentize_py_is_found_in_order_and_missing_says_how_to_install_it() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("agent");
        let on_path = root.path().join("bin");
        let path_var = std::env::join_paths([&on_path]).unwrap();
        std::fs::create_dir_all(&project).unwrap();

        let err = find(&project, None, None, &path_var)
            .unwrap_err()
            .to_string();
        assert!(err.contains("componentize-py was not found"), "{err}");
        assert!(err.contains("pip install componentize-py==0.25.1"), "{err}");

        executable(&on_path.join("componentize-py"));
        let found = find(&project, None, None, &path_var).unwrap();
        assert_eq!(found.path, on_path.join("componentize-py"));
        assert_eq!(found.venv, None);

        let venv = project.join(".venv");
        executable(&venv.join("bin/componentize-py"));
        let found = find(&project, None, None, &path_var).unwrap();
        assert_eq!(found.venv, Some(venv.clone()));

        let explicit = root.path().join("elsewhere/componentize-py");
        executable(&explicit);
        let found = find(&project, Some(explicit.clone()), None, &path_var).unwrap();
        assert_eq!(found.path, explicit);
        let err = find(&project, Some(root.path().join("nope")), None, &path_var)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an executable file"), "{err}");
    }

    /// Every file of the SDK and of its WIT is embedded, and nothing else.
    #[test]
    fn every_sdk_file_is_embedded() {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/python");
        let mut on_disk = BTreeSet::new();
        for (top, ext, prefix) in [("agenthost", "py", "sdk/"), ("wit", "wit", "")] {
            for entry in ignore::WalkBuilder::new(sdk.join(top)).build() {
                let entry = entry.unwrap();
                if entry.path().extension().is_some_and(|e| e == ext) {
                    let relative = entry.path().strip_prefix(&sdk).unwrap();
                    on_disk.insert(format!("{prefix}{}", relative.display()));
                }
            }
        }
        on_disk.insert("wit/deps/agenthost/agent.wit".into());
        let embedded: BTreeSet<String> = FILES.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(embedded, on_disk);
    }
}
