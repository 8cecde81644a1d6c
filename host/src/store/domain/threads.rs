//! AG-UI threads: the session a thread names (one per app, route and
//! thread id, created on the thread's first run), and the two ways a run
//! on a thread starts a turn: a new input, or the decision on the pending
//! approval. Each ticket holds the seq of the turn's `TURN_STARTED`, where
//! the run's events begin. The rules themselves are those of `sessions.rs`.

use serde_json::Value;
use uuid::Uuid;

use super::queue::OnBusy;
use super::sessions::{CreateSession, Decide, InputOutcome, PostInput};
use super::{By, Decision, TurnTicket};
use crate::store::Missing;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::error::corrupt;
use crate::store::records::SessionRecord;

/// A turn a run on a thread started (the ticket holds the seq of its
/// `TURN_STARTED`, where the run's events begin).
#[derive(Debug, Clone)]
pub struct ThreadTurn {
    pub session: SessionRecord,
    pub ticket: TurnTicket,
}

/// A run's input on a thread: the thread's session takes it as its next
/// input, or, on the thread's first run, is created with it (pinned to the
/// app's current deployment, as `POST /sessions` does).
pub(in crate::store) struct OpenThread {
    pub app: String,
    pub route: String,
    pub thread: String,
    pub input: Value,
    /// Who runs it: an end user's threads are theirs alone.
    pub by: By,
}

/// The stored name of thread `thread` of end user `user` (of none: the
/// name itself). Each end user has threads of their own: the same
/// `threadId` from two users names two threads. A user's names start with
/// `@`, which a thread id sent with a bare invocation key cannot
/// (`end_users::unguessable`).
pub(crate) fn thread_key(thread: &str, user: Option<&str>) -> String {
    match user {
        Some(user) => format!("@{}:{user}/{thread}", user.len()),
        None => thread.to_string(),
    }
}

impl Op for OpenThread {
    type Output = ThreadTurn;

    fn tickets(turn: &ThreadTurn) -> Vec<TurnTicket> {
        vec![turn.ticket.clone()]
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<ThreadTurn, StoreError> {
        let app = (batch.tx.app(&self.app)?)
            .ok_or_else(|| StoreError::not_found(Missing::App, &self.app))?;
        let user = self.by.user();
        let thread = thread_key(&self.thread, user);
        if let Some(id) = batch.tx.thread_session(app.id, &self.route, &thread)? {
            if batch.session(id)?.record.end_user.as_deref() != user {
                return Err(StoreError::not_found(Missing::Session, id));
            }
            let outcome = PostInput {
                session: id,
                input: self.input.clone(),
                on_busy: OnBusy::Reject,
                schedule: None,
                by: self.by.clone(),
            }
            .apply(batch)?;
            let InputOutcome::Started(ticket) = outcome else {
                return Err(corrupt("an input that may not queue was queued"));
            };
            let session = batch.session(id)?.record.clone();
            return Ok(ThreadTurn { session, ticket });
        }
        let (session, ticket) = CreateSession {
            app: app.id.to_string(),
            route: self.route.clone(),
            input: self.input.clone(),
            by: self.by.clone(),
            reason: crate::journal::payloads::StartReason::Input,
        }
        .apply(batch)?;
        batch
            .tx
            .put_thread(app.id, &self.route, &thread, session.id)?;
        Ok(ThreadTurn { session, ticket })
    }
}

/// The decision on a session's pending approval, taken only if the
/// approval pending is the one whose `TOOL_APPROVAL_REQUIRED` is at
/// `approval_seq` (the interrupt the client answers); 409 otherwise.
pub(in crate::store) struct DecideAt {
    pub session: Uuid,
    pub approval_seq: u64,
    pub decision: Decision,
}

impl Op for DecideAt {
    type Output = ThreadTurn;

    fn tickets(turn: &ThreadTurn) -> Vec<TurnTicket> {
        vec![turn.ticket.clone()]
    }

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<ThreadTurn, StoreError> {
        let row = batch.session(self.session)?;
        let pending_seq = row.record.pending_approval.as_ref().map(|p| p.event_seq);
        if pending_seq != Some(self.approval_seq) {
            return Err(StoreError::Conflict(
                "that interrupt is not pending: it was already answered, or the turn ended".into(),
            ));
        }
        let ticket = Decide {
            session: self.session,
            decision: self.decision.clone(),
        }
        .apply(batch)?;
        let session = batch.session(self.session)?.record.clone();
        Ok(ThreadTurn { session, ticket })
    }
}
