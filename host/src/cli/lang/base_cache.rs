//! The cache of language bases (`python_base`, `typescript_base`): what a
//! build of one language makes once per toolchain version and SDK, kept in
//! a directory named by the hash of what went into it, built beside it and
//! renamed into place under a lock (so concurrent builds wait for one
//! another and never see half of one), and the compiled artifacts kept
//! beside a base.
//!
//! The cache of a language is `$AGENTHOST_<LANGUAGE>_CACHE`, else
//! `$XDG_CACHE_HOME/agenthost/<language>`, else `~/.cache/agenthost/<language>`.
//! Everything in it is safe to delete.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// The cache directory of `language`, or `var` when it is set.
pub(super) fn root(var: &str, language: &str) -> anyhow::Result<PathBuf> {
    let value = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = value(var) {
        return Ok(PathBuf::from(dir));
    }
    let cache = match (value("XDG_CACHE_HOME"), value("HOME")) {
        (Some(xdg), _) => PathBuf::from(xdg),
        (None, Some(home)) => PathBuf::from(home).join(".cache"),
        (None, None) => {
            bail!("no cache directory for the {language} base: set {var}, XDG_CACHE_HOME or HOME")
        }
    };
    Ok(cache.join("agenthost").join(language))
}

/// The hash that names a base: of `parts`, each length-prefixed.
pub(super) fn key<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part.len().to_le_bytes());
        hash.update(part);
    }
    hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The base `root/key`, which holds the file `marker` once it is built:
/// built by `build` (into the directory it is given) if it is not there yet.
pub(super) fn ensure(
    root: &Path,
    key: &str,
    marker: &str,
    build: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let dir = root.join(key);
    if dir.join(marker).is_file() {
        return Ok(dir);
    }
    let lock_path = root.join(format!("{key}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("cannot create {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    if dir.join(marker).is_file() {
        return Ok(dir); // built by another build while this one waited
    }
    let partial = root.join(format!(".{key}.{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let built = build(&partial).and_then(|()| {
        std::fs::rename(&partial, &dir)
            .with_context(|| format!("cannot rename {} into place", partial.display()))
    });
    if built.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    built.map(|()| dir)
}

/// A compiled artifact kept at `path`: loaded from there by `load` when a
/// build made it before (and `load` accepts it), else made by `precompile`,
/// kept, and loaded. Concurrent builds that miss it wait for the one that
/// makes it (a lock beside it). Keeping it is an optimisation: failing to
/// lock or write it costs time, not the build.
pub(super) fn compiled<T>(
    path: &Path,
    load: impl Fn(&[u8]) -> anyhow::Result<T>,
    precompile: impl FnOnce() -> anyhow::Result<Vec<u8>>,
) -> anyhow::Result<T> {
    let cached = || {
        let serialized = std::fs::read(path).ok()?;
        load(&serialized).ok()
    };
    if let Some(loaded) = cached() {
        return Ok(loaded);
    }
    let lock = std::fs::File::create(path.with_extension("lock"));
    let _locked = lock.as_ref().ok().filter(|file| file.lock().is_ok());
    if let Some(loaded) = cached() {
        return Ok(loaded); // made by another build while this one waited
    }
    let serialized = precompile()?;
    if let Some(dir) = path.parent() {
        let partial = dir.join(format!(".{}.partial", uuid::Uuid::now_v7().simple()));
        if std::fs::write(&partial, &serialized).is_ok() && std::fs::rename(&partial, path).is_err()
        {
            let _ = std::fs::remove_file(&partial);
        }
    }
    load(&serialized)
}
