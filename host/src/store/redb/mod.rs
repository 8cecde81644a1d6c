//! The embedded engine: everything in one redb file (the default).
//!
//! Reads are short read transactions; the writer's transactions commit with
//! `Durability::Immediate`: one fsync, checksummed (redb's one-phase
//! commit), or with `quick_repair` two fsyncs and the allocator state, so a
//! restart after a crash needs no repair walk (docs/durability.md). The
//! writer keeps the sessions
//! it touched cached between batches (at most `SESSION_CACHE` past a batch;
//! idle ones are dropped and re-read): it is the only writer of the file.

mod end_users;
mod feed;
#[cfg(test)]
mod ids_tests;
mod reads;
mod tables;
mod tx;
mod webhooks;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use redb::Database;
use uuid::Uuid;

use super::StoreError;
use super::engine::{SessionRow, WriteEngine, WriteTx};
use super::records::SessionStatus;
use tx::RedbTx;

/// redb's page cache unless the operator says otherwise (`--journal-cache-mb`).
/// redb's own default is 1 GiB, which a busy server fills within a minute;
/// the kernel's page cache still holds the file beyond it.
pub(crate) const DEFAULT_CACHE_BYTES: usize = 256 << 20;
/// Sessions the writer keeps cached between batches; past this, the ones
/// without a running turn are dropped (and re-read from redb when needed).
pub(crate) const SESSION_CACHE: usize = 4096;

/// How the redb file is opened and committed (`--journal-cache-mb`,
/// `--journal-quick-repair`).
#[derive(Debug, Clone, Copy)]
pub struct RedbOptions {
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
    /// Every commit also saves the allocator state and commits in two
    /// phases: a restart after a crash opens at once instead of walking
    /// the file (about 1.4-3.7 s per GiB, BENCHMARKS.md), for a second
    /// fsync per commit.
    pub quick_repair: bool,
}

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            cache_bytes: DEFAULT_CACHE_BYTES,
            quick_repair: false,
        }
    }
}

/// Maps any redb error to `StoreError::Storage`.
pub(super) fn storage(err: impl Into<redb::Error>) -> StoreError {
    StoreError::Storage(err.into().to_string())
}

/// The redb engine: one database file.
pub(crate) struct RedbEngine {
    db: Arc<Database>,
    session_cache: usize,
    quick_repair: bool,
}

impl RedbEngine {
    /// Opens (or creates) the database file and makes sure every table exists.
    pub(crate) fn open(path: &Path, options: RedbOptions) -> Result<RedbEngine, StoreError> {
        let db = Database::builder()
            .set_cache_size(options.cache_bytes)
            .create(path)
            .map_err(storage)?;
        let mut engine = RedbEngine::init(db)?;
        engine.quick_repair = options.quick_repair;
        Ok(engine)
    }

    /// Opens a database on a given storage backend (tests inject failures with it).
    #[cfg(test)]
    pub(crate) fn open_with_backend(
        backend: impl redb::StorageBackend,
    ) -> Result<RedbEngine, StoreError> {
        RedbEngine::init(
            Database::builder()
                .create_with_backend(backend)
                .map_err(storage)?,
        )
    }

    /// Another number of sessions the writer keeps cached (the model test
    /// evicts on every batch).
    #[cfg(test)]
    pub(crate) fn with_session_cache(mut self, sessions: usize) -> Self {
        self.session_cache = sessions;
        self
    }

    fn init(db: Database) -> Result<RedbEngine, StoreError> {
        tables::create_all(&db)?;
        Ok(RedbEngine {
            db: Arc::new(db),
            session_cache: SESSION_CACHE,
            quick_repair: false,
        })
    }

    pub(super) fn write_side(&self) -> Box<dyn WriteEngine> {
        Box::new(RedbWriter {
            db: self.db.clone(),
            sessions: HashMap::new(),
            session_cache: self.session_cache,
            quick_repair: self.quick_repair,
        })
    }
}

/// The writer thread's side: the committed view of the sessions it touched.
struct RedbWriter {
    db: Arc<Database>,
    sessions: HashMap<Uuid, SessionRow>,
    session_cache: usize,
    quick_repair: bool,
}

impl WriteEngine for RedbWriter {
    /// One attempt: a failed commit is a `Storage` error, which stops writes.
    fn applies_once(&self) -> bool {
        true
    }

    fn transact(
        &mut self,
        apply: &mut dyn FnMut(&mut dyn WriteTx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(storage)?;
        // Acknowledged means on disk.
        if let Err(err) = txn.set_durability(redb::Durability::Immediate) {
            tracing::error!(error = %err, "cannot set immediate durability");
        }
        txn.set_quick_repair(self.quick_repair);
        let (touched, deleted) = {
            let mut tx = RedbTx::new(&txn, &self.sessions)?;
            apply(&mut tx)?;
            tx.into_touched()
        };
        let started = std::time::Instant::now();
        txn.commit().map_err(storage)?;
        crate::metrics::get()
            .commit
            .observe(started.elapsed().as_secs_f64());
        self.sessions.extend(touched);
        for id in deleted {
            self.sessions.remove(&id);
        }
        if self.sessions.len() > self.session_cache {
            (self.sessions).retain(|_, s| s.record.status == SessionStatus::Running);
        }
        Ok(())
    }
}
