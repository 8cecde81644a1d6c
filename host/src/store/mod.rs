//! Durable state: the journal, sessions, apps, deployments, keys, secrets.
//!
//! Three layers, top down: `domain` (the rules, written once: each command
//! an `Op`), the writer (`writer`, `commands`, `outbox`: one thread applies
//! batches of commands in one transaction, commits, starts the turns they
//! journaled (`start`), then acknowledges and publishes to the `hub`), and
//! the engines behind the boundary in `engine` (`redb`, the embedded
//! default). Below the domain, leaves it builds on: `batch` (`Op`, `Batch`),
//! `start` (`TurnTicket`, `TurnSink`), `records`. Reads go straight
//! to the engine in short transactions of their own, never held across an
//! await.

mod batch;
mod commands;
mod domain;
mod engine;
mod error;
mod hub;
mod outbox;
pub(crate) mod postgres;
mod records;
pub(crate) mod redb;
mod start;
mod webhook_commands;
mod webhook_records;
mod writer;

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) use batch::Quotas;
pub use commands::WriterHandle;
#[cfg(test)]
use domain::IDEMPOTENCY_TTL;
pub(crate) use domain::{
    AttemptOutcome, CronRule, Decision, Fired, Idempotency, InputOutcome, MAX_KEY_LEN, OnBusy,
    PolicyRefusal, Reserved, TurnAnswer, TurnOutcome, WEBHOOK_MAX_PENDING, rfc3339_ms, thread_key,
    unix_ms,
};
pub use domain::{BuildOutcome, By, NewDeployment};
pub(crate) use domain::{END_USER_KEY_PREFIX, end_user_key};
pub(crate) use domain::{MAX_SCHEDULES, MAX_TURN_SCHEDULES, TurnTimers};
#[cfg(test)]
pub(crate) use domain::{webhook_deployment_data, webhook_event_data, webhook_withdrawn_data};
pub use engine::SessionFilter;
pub(crate) use engine::{ApprovalItem, DueSchedule, Engine, FeedPage};
pub(crate) use error::{Cap, Missing, StoreError};
pub(crate) use hub::{Hub, Subscription};
pub use outbox::Outbox;
pub(crate) use outbox::payload_bytes;
#[cfg(test)]
pub(crate) use records::WithdrawReason;
pub use records::{AgentDescription, Artifact, DeploymentStatus, KeyClass, LimitsRecord};
pub(crate) use records::{
    ApiKeyRecord, AppRecord, ApprovalFeedEntry, Budget, BudgetPause, DecisionDetails,
    DeploymentRecord, EndUsersRecord, FeedKind, PendingApproval, ScheduleCreator, ScheduleRecord,
    SecretRecord, SessionRecord, SessionStatus, Spend, ToolCallRecord, ToolInfo,
};
#[cfg(test)]
pub(crate) use records::{LlmSpend, Reservation};
pub use redb::RedbOptions;
pub(crate) use start::{Committed, TurnReason, TurnSink, TurnTicket};
pub(crate) use webhook_records::{
    DeliveryAttempt, DeliveryRecord, DeliveryState, WEBHOOK_EVENTS, WebhookRecord,
};
pub use writer::Writer;

/// The `Redactor` of every secret stored now, for the texts the writer
/// rebuilds from the journal (a message it closes itself after a crash or a
/// failed write): the writer cannot know which secrets that turn had.
pub(crate) type CurrentRedactor = Arc<dyn Fn() -> crate::redact::Redactor + Send + Sync>;

/// The storage handle (named apart from wasmtime's `Store`): shared, cheap
/// to clone. Its read queries are the engine's (`Engine`), reached through
/// `Deref`.
#[derive(Clone)]
pub struct Db {
    engine: Arc<dyn Engine>,
    hub: Arc<Hub>,
    /// Set when a commit failed on redb (disk full, I/O error): writes stop, not ready.
    degraded: Arc<AtomicBool>,
}

impl Db {
    /// Opens (or creates) a redb database file with the default options.
    pub fn open(path: &Path) -> Result<Db, StoreError> {
        Db::open_with(path, RedbOptions::default())
    }

    /// `open` with other options (page cache, quick repair).
    pub fn open_with(path: &Path, options: RedbOptions) -> Result<Db, StoreError> {
        Ok(Db::new(redb::RedbEngine::open(path, options)?))
    }

    /// A store over an engine.
    pub fn new(engine: impl Engine) -> Db {
        Db {
            engine: Arc::new(engine),
            hub: Arc::new(Hub::default()),
            degraded: Arc::default(),
        }
    }

    /// Runs a blocking read on the blocking pool.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::Storage(format!("read task failed: {e}")))?
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

impl Deref for Db {
    type Target = dyn Engine;

    fn deref(&self) -> &Self::Target {
        &*self.engine
    }
}

/// The current time as an RFC 3339 UTC timestamp with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod idempotency_tests;
#[cfg(test)]
pub(crate) use idempotency_tests::{Backend as TestBackend, start as start_for_tests};
#[cfg(test)]
pub(crate) use tests::{new_deployment, success};
#[cfg(test)]
mod model_tests;
#[cfg(test)]
#[path = "../../../tests/support/pg_cluster.rs"]
#[allow(dead_code, unreachable_pub)]
// OwnCluster serves the e2e tests only; its items are the e2e crate's.
mod pg_cluster;
#[cfg(test)]
mod schedule_tests;
#[cfg(test)]
mod start_tests;
#[cfg(test)]
pub(crate) mod test_calls;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod webhook_tests;
