//! Durable state in one redb file: the journal, sessions, apps, deployments, keys.
//!
//! Reads go straight to redb in short read transactions (never held across an
//! await). Every write is a command to the single writer thread (`writer`),
//! which checks it against committed and pending state, commits a batch with
//! `Durability::Immediate`, then acknowledges and publishes to the `hub`.

mod apikeys;
mod batch;
mod commands;
mod deployments;
mod error;
mod hub;
mod outbox;
mod reads;
mod records;
mod recovery;
mod secrets;
pub mod sessions;
mod tables;
mod txn;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::Database;

pub use commands::{
    BuildOutcome, Decision, NewDeployment, TurnOutcome, TurnReason, TurnTicket, WriterHandle,
};
pub use error::StoreError;
pub use hub::{Hub, Subscription};
pub use outbox::{AppendAck, Outbox};
pub use reads::{ApprovalItem, EventPosition, SessionFilter};
pub use records::{
    AgentDescription, ApiKeyRecord, AppRecord, Artifact, DeploymentRecord, DeploymentStatus,
    KeyClass, LimitsRecord, PendingApproval, ResumeRecord, SecretRecord, SessionRecord,
    SessionStatus, ToolCallRecord, ToolInfo,
};
pub use recovery::Redact;
pub use writer::Writer;

use error::storage;

/// Shared handle to the database: cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    hub: Arc<Hub>,
    /// Set when a commit failed (disk full, I/O error): writes stop, not ready.
    degraded: Arc<AtomicBool>,
}

/// redb's page cache unless the operator says otherwise (`--journal-cache-mb`).
/// redb's own default is 1 GiB, which a busy server fills within a minute;
/// the kernel's page cache still holds the file beyond it.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

impl Store {
    /// Opens (or creates) the database file and makes sure every table exists.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_with_cache(path, DEFAULT_CACHE_BYTES)
    }

    /// `open` with a page cache of `cache_bytes`.
    pub fn open_with_cache(path: &Path, cache_bytes: usize) -> Result<Store, StoreError> {
        Store::init(
            Database::builder()
                .set_cache_size(cache_bytes)
                .create(path)
                .map_err(storage)?,
        )
    }

    /// Opens a database on a given storage backend (tests inject failures with it).
    pub fn open_with_backend(backend: impl redb::StorageBackend) -> Result<Store, StoreError> {
        Store::init(
            Database::builder()
                .create_with_backend(backend)
                .map_err(storage)?,
        )
    }

    fn init(db: Database) -> Result<Store, StoreError> {
        let txn = db.begin_write().map_err(storage)?;
        {
            txn.open_table(tables::EVENTS).map_err(storage)?;
            txn.open_table(tables::EVENT_IDS).map_err(storage)?;
            txn.open_table(tables::SESSIONS).map_err(storage)?;
            txn.open_table(tables::APPS).map_err(storage)?;
            txn.open_table(tables::APP_SLUGS).map_err(storage)?;
            txn.open_table(tables::DEPLOYMENTS).map_err(storage)?;
            txn.open_table(tables::APP_DEPLOYMENTS).map_err(storage)?;
            txn.open_table(tables::API_KEYS).map_err(storage)?;
            txn.open_table(tables::PENDING_APPROVALS).map_err(storage)?;
            txn.open_table(tables::SECRETS).map_err(storage)?;
        }
        txn.commit().map_err(storage)?;
        Ok(Store {
            db: Arc::new(db),
            hub: Arc::new(Hub::default()),
            degraded: Arc::default(),
        })
    }

    /// Whether writes have stopped after a storage failure.
    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    fn set_degraded(&self) {
        self.degraded.store(true, Ordering::Relaxed);
    }

    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }
}

/// The current time as an RFC 3339 UTC timestamp with milliseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
