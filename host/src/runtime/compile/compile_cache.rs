//! The compile cache: Cranelift's incremental cache on disk, so a deploy
//! recompiles only the functions no earlier deploy compiled (a Python
//! agent whose `app.py` changed shares every function of its interpreter
//! with the previous build).
//!
//! One file per compiled function, `<dir>/<2 hex>/<64 hex>` named by the
//! key Cranelift computes (a SHA-256 of the function's IR, the target and
//! the compiler's flags and version), holding the SHA-256 of the entry
//! followed by the entry. An entry is written to a temporary name and
//! renamed, never fsynced: it is a cache. One that does not match its
//! checksum (torn by a crash, damaged on disk) is a miss, so wrong code is
//! never loaded from it. Nothing is ever evicted: delete the directory to
//! empty it (docs/limits.md says so).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::CacheStore;

const CHECKSUM: usize = 32;

/// Cranelift's incremental cache in a directory.
#[derive(Debug)]
pub(super) struct CompileCache {
    dir: PathBuf,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl CompileCache {
    /// A cache in `dir`, created if missing.
    pub(super) fn open(dir: &Path) -> std::io::Result<CompileCache> {
        std::fs::create_dir_all(dir)?;
        Ok(CompileCache {
            dir: dir.to_path_buf(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    /// Functions found in the cache and functions compiled, since the start.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn path(&self, key: &[u8]) -> PathBuf {
        let name = hex::encode(key);
        let shard = name.get(..2).unwrap_or("00");
        self.dir.join(shard).join(name)
    }
}

/// An entry's bytes if they match their checksum.
fn verified(bytes: Vec<u8>) -> Option<Vec<u8>> {
    if bytes.len() < CHECKSUM {
        return None;
    }
    let (sum, value) = bytes.split_at(CHECKSUM);
    (Sha256::digest(value).as_slice() == sum).then(|| value.to_vec())
}

impl CacheStore for CompileCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let found = std::fs::read(self.path(key)).ok().and_then(verified);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found.map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let path = self.path(key);
        let write = || -> std::io::Result<()> {
            if let Some(shard) = path.parent() {
                std::fs::create_dir_all(shard)?;
            }
            // Compilation is parallel: each writer gets its own temporary name.
            let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::now_v7().simple()));
            let mut entry = Vec::with_capacity(CHECKSUM + value.len());
            entry.extend_from_slice(&Sha256::digest(&value));
            entry.extend_from_slice(&value);
            std::fs::write(&tmp, &entry)?;
            std::fs::rename(&tmp, &path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
        };
        match write() {
            Ok(()) => true,
            Err(err) => {
                tracing::debug!(error = %err, "cannot write a compile cache entry");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damaged_ones_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(dir.path()).unwrap();
        let key = [7u8; 32];
        assert!(cache.get(&key).is_none());
        assert!(cache.insert(&key, b"compiled code".to_vec()));
        assert_eq!(cache.get(&key).as_deref(), Some(&b"compiled code"[..]));
        assert_eq!(cache.counts(), (1, 1));

        // A torn or damaged entry is never handed to Cranelift.
        let path = cache.path(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&key).is_none());
        std::fs::write(&path, &bytes[..10]).unwrap();
        assert!(cache.get(&key).is_none());
        assert_eq!(cache.counts(), (1, 3));
        // No temporary file is left behind.
        let shard = path.parent().unwrap();
        assert_eq!(std::fs::read_dir(shard).unwrap().count(), 1);
    }
}
