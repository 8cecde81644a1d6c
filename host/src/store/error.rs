//! `StoreError`: everything the store can answer besides success.

/// Rejections decided by the writer against committed state, and storage failures.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The named thing does not exist; `hint`, when not empty, follows
    /// the message (what does exist).
    #[error("{} `{key}` not found{hint}", what.as_str())]
    NotFound {
        what: Missing,
        key: String,
        hint: String,
    },
    /// The request conflicts with the current state (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// A cap refuses what would exceed it (HTTP 429 `quota_exceeded`, or
    /// the cap's own code: `api/error.rs`).
    #[error("{message}")]
    Quota { cap: Cap, message: String },
    /// A per-user rate refuses what would exceed it (HTTP 429
    /// `quota_exceeded` with `Retry-After`).
    #[error("{message}")]
    Throttled {
        cap: Cap,
        message: String,
        retry_after_secs: u64,
    },
    /// The request is well-formed but refused (HTTP 422).
    #[error("{0}")]
    Rejected(String),
    /// The caller may not do this here (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
    /// The app's `[end_users]` policy refuses this caller (HTTP 401 or
    /// 403, `domain::by`).
    #[error("{}", .0.message())]
    Policy(super::domain::PolicyRefusal),
    /// An `Idempotency-Key` first used on another request (HTTP 422).
    #[error("{0}")]
    KeyReused(String),
    /// The engine failed (I/O, disk full, ...). Nothing of the failed batch
    /// was committed; on redb, writes stop until a restart.
    #[error("storage failure: {0}")]
    Storage(String),
    /// Data the engine cannot store (PostgreSQL refuses text holding a
    /// NUL): the command's own fault (HTTP 422). It fails the batch it was
    /// in (PostgreSQL aborted the transaction); the writer then applies
    /// that batch's other commands again without it.
    #[error("{0}")]
    Unstorable(String),
    /// The engine cannot be reached for now (PostgreSQL down or restarting).
    /// Nothing of the failed batch was committed; the next call tries again.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A stored record could not be decoded.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The writer thread is gone (shutting down or crashed).
    #[error("the journal writer has stopped")]
    WriterGone,
}

/// What a `StoreError::NotFound` did not find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    App,
    Session,
    Route,
    Deployment,
    Schedule,
    Webhook,
    Delivery,
    ApiKey,
    Secret,
}

impl Missing {
    /// The word the message says.
    pub fn as_str(self) -> &'static str {
        match self {
            Missing::App => "app",
            Missing::Session => "session",
            Missing::Route => "route",
            Missing::Deployment => "deployment",
            Missing::Schedule => "schedule",
            Missing::Webhook => "webhook",
            Missing::Delivery => "delivery",
            Missing::ApiKey => "api key",
            Missing::Secret => "secret",
        }
    }
}

/// The cap behind a `StoreError::Quota` or `Throttled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// An app's open sessions.
    OpenSessions,
    /// An app's running turns.
    RunningTurns,
    /// One end user's open sessions of an app.
    OpenSessionsPerUser,
    /// One end user's or bare-key address's share of an app's open
    /// sessions (`--invocation-share-per-principal`).
    OpenSessionsShare,
    /// Their share of an app's running turns.
    RunningTurnsShare,
    /// One end user's turns in any 60 s.
    TurnsPerMinutePerUser,
    /// A session's journal (`--max-session-journal-mb`).
    JournalBytes,
    /// A session's queued inputs.
    QueuedInputs,
    /// A session's or an app's schedules.
    Schedules,
}

impl Cap {
    /// Its name in `/metrics` (`agenthost_quota_refusals_total{cap}`) and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Cap::OpenSessions => "open_sessions",
            Cap::RunningTurns => "running_turns",
            Cap::OpenSessionsPerUser => "open_sessions_per_user",
            Cap::OpenSessionsShare => "open_sessions_share",
            Cap::RunningTurnsShare => "running_turns_share",
            Cap::TurnsPerMinutePerUser => "turns_per_minute_per_user",
            Cap::JournalBytes => "journal_bytes",
            Cap::QueuedInputs => "queued_inputs",
            Cap::Schedules => "schedules",
        }
    }
}

impl StoreError {
    pub fn not_found(what: Missing, key: impl ToString) -> Self {
        StoreError::NotFound {
            what,
            key: key.to_string(),
            hint: String::new(),
        }
    }

    /// Whether a command failing this way may have left part of itself in
    /// the transaction, so that the whole batch must fail.
    pub fn fails_batch(&self) -> bool {
        matches!(
            self,
            StoreError::Storage(_)
                | StoreError::Unavailable(_)
                | StoreError::Corrupt(_)
                | StoreError::Unstorable(_)
        )
    }
}

/// Maps a record decoding error to `StoreError::Corrupt`.
pub(super) fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}
