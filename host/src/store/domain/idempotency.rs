//! Idempotency keys: a command that carries one does its work once per
//! API key and `Idempotency-Key`, and its first answer is committed in the
//! same transaction as the work, so a retry (after a lost response, a crash,
//! on another host) gets that answer instead of a second effect.
//!
//! The rule, written once for the four commands that take a key
//! (`CreateSession`, `PostInput`, `Decide`, `CreateDeployment`, each
//! `Remembered` beside its rule): a key
//! remembered and not expired answers its first answer when the request's
//! fingerprint is the same, and is refused (422) when it is not; otherwise
//! the command runs and its answer is remembered for `TTL`. Only a success
//! is remembered: a refused command leaves the key free. The writer
//! serializes commands (and, on PostgreSQL, the engine makes a transaction
//! wait for another one holding the same key), so a retry racing its first
//! attempt waits for it and gets its answer: there is no "in progress".

use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::TurnTicket;
use super::clock::unix_ms;
use crate::store::batch::{Batch, Op};
use crate::store::error::corrupt;
use crate::store::records::{AppRecord, DeploymentRecord, IdempotencyRecord, SessionStatus};
use crate::store::{StoreError, now_rfc3339};

/// How long a key's first answer is remembered.
pub(crate) const TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Longest key accepted (the API checks it; the stores assume it).
pub(crate) const MAX_KEY_LEN: usize = 255;

/// An `Idempotency-Key` as the writer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The id of the API key that sent it: keys are scoped per API key.
    pub key_id: String,
    /// The header's value: 1 to `MAX_KEY_LEN` visible ASCII characters.
    pub key: String,
    /// SHA-256 (hex) of the request's method, path and body.
    pub fingerprint: String,
}

/// What a command that took a key answers.
#[derive(Debug, Clone)]
pub struct Answered<T, A> {
    /// The answer to send: the first one when replayed.
    pub answer: A,
    /// The command's own output when it did its work now; `None` when the
    /// answer is a replay (nothing to schedule).
    pub work: Option<T>,
}

/// A command whose answer can be remembered under an idempotency key.
pub(in crate::store) trait Remembered: Op {
    /// Names the command in the stored record.
    const COMMAND: &'static str;
    /// The answer kept: everything the API renders its response from.
    type Answer: Serialize + DeserializeOwned + Send + 'static;
    /// The answer to `output`, from the transaction that produced it.
    fn answer(batch: &mut Batch<'_>, output: &Self::Output) -> Result<Self::Answer, StoreError>;
}

/// `op`, done once per key (or every time without one).
pub(in crate::store) struct Once<O> {
    pub op: O,
    pub key: Option<Idempotency>,
}

impl<O: Remembered> Op for Once<O> {
    type Output = Answered<O::Output, O::Answer>;

    /// A replay starts nothing: the first request's turn started then.
    fn tickets(answered: &Self::Output) -> Vec<TurnTicket> {
        answered.work.as_ref().map(O::tickets).unwrap_or_default()
    }

    fn session(&self) -> Option<Uuid> {
        self.op.session()
    }

    fn abandon(&mut self) {
        self.op.abandon();
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError> {
        let Some(key) = &self.key else {
            let output = self.op.apply(batch)?;
            let answer = O::answer(batch, &output)?;
            return Ok(Answered {
                answer,
                work: Some(output),
            });
        };
        let now = unix_ms(SystemTime::now());
        if let Some(first) = batch.tx.idempotency(&key.key_id, &key.key)?
            && first.expires_at_ms > now
        {
            if first.command != O::COMMAND || first.fingerprint != key.fingerprint {
                return Err(StoreError::KeyReused(format!(
                    "Idempotency-Key `{}` was first used on another request (another endpoint, \
                     session or body); a retry must repeat the request exactly, a new request \
                     needs a new key",
                    key.key
                )));
            }
            let answer = serde_json::from_value(first.answer).map_err(corrupt)?;
            return Ok(Answered { answer, work: None });
        }
        let output = self.op.apply(batch)?;
        let answer = O::answer(batch, &output)?;
        let record = IdempotencyRecord {
            command: O::COMMAND.into(),
            fingerprint: key.fingerprint.clone(),
            created_at: now_rfc3339(),
            expires_at_ms: now.saturating_add(TTL.as_millis() as u64),
            answer: serde_json::to_value(&answer).map_err(corrupt)?,
        };
        batch.tx.put_idempotency(&key.key_id, &key.key, &record)?;
        Ok(Answered {
            answer,
            work: Some(output),
        })
    }
}

/// Forgets the answers expired at `now_ms` (at most `limit`; the caller
/// repeats while it gets `limit`). `now_ms` is a parameter so a test can
/// look a day ahead.
pub(in crate::store) struct PurgeIdempotency {
    pub now_ms: u64,
    pub limit: usize,
}

impl Op for PurgeIdempotency {
    type Output = usize;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<usize, StoreError> {
        batch.tx.purge_idempotency(self.now_ms, self.limit)
    }
}

/// The answer to `POST /sessions/{id}/input`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnAnswer {
    pub session_id: Uuid,
    /// The turn started; for a queued input, the session's turn then.
    pub turn: u32,
    /// Set when the input was queued (`on_busy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<QueuedAnswer>,
}

/// A queued input, as `POST /sessions/{id}/input` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedAnswer {
    pub input_id: String,
    pub position: u32,
    /// The session's status when it was queued.
    pub status: SessionStatus,
}

/// The answer to `POST /sessions/{id}/approval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionAnswer {
    pub session_id: Uuid,
    pub turn: u32,
    pub tool_call_id: String,
    pub approved: bool,
    pub approver: String,
}

/// The answer to `POST /deployments`: the new row and its app as committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeploymentAnswer {
    pub deployment: DeploymentRecord,
    pub app: AppRecord,
}
