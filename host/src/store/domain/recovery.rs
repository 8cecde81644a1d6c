//! The recovery rules: settling turns that no live host owns (the process
//! died, or on PostgreSQL a host's lease expired), and closing a turn the
//! runner could not close itself: its open messages get a MESSAGE_END
//! marked `incomplete`, rebuilt from what the journal committed, then
//! TURN_ERROR.

use serde_json::Value;
use uuid::Uuid;

use super::closing::closing_events;
use super::sessions::finish_turn;
use super::{TurnOutcome, TurnReason, TurnTicket};

use crate::journal::payloads::{MessageDelta, MessageEnd, MessageStart, Role, TurnStarted};
use crate::journal::{EventType, StoredEvent, TurnErrorKind};
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::error::corrupt;

/// What `Recover` did.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Accepted turns that never left a trace, to be scheduled again, and
    /// queued inputs started behind the turns it closed.
    pub restarted: Vec<TurnTicket>,
    /// Turns closed with TURN_ERROR `host_restarted`.
    pub closed: Vec<Uuid>,
}

/// Settles the turns no live host owns, for the writer's host: a turn that
/// left no trace in the journal (it never started, or died before its first
/// effect) is started again here; any other is closed with
/// TURN_ERROR. A resumed turn that did start is never run again behind the
/// user's back.
pub(in crate::store) struct Recover;

impl Op for Recover {
    type Output = Recovery;

    /// The turns handed back start again here (`store::start`).
    fn tickets(recovery: &Recovery) -> Vec<TurnTicket> {
        recovery.restarted.clone()
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Recovery, StoreError> {
        let boot = batch.state.boot;
        let mut recovery = Recovery::default();
        for record in batch.tx.orphaned_turns(boot)? {
            let (id, turn) = (record.id, record.turn);
            // This host owns the turn from now on, whatever it does with it.
            batch.session(id)?.record.boot_id = Some(boot);
            batch.touch(id);
            let journal = batch.tx.last_turn_events(id)?;
            if let Some(input) = untouched_turn_input(&journal)? {
                let reason = match record.resume {
                    Some(resume) => TurnReason::ApprovalDecision {
                        approved: resume.approved,
                        approver: resume.approver,
                        pending: Box::new(resume.pending),
                        details: Box::new(resume.details),
                    },
                    None => TurnReason::Input,
                };
                recovery.restarted.push(TurnTicket {
                    session_id: id,
                    turn,
                    deployment_id: record.deployment_id,
                    app_slug: record.app_slug,
                    route: record.route,
                    input,
                    reason,
                    // The journal's turn starts at its TURN_STARTED.
                    started_seq: journal.first().map_or(0, |start| start.seq),
                    journal_bytes: record.journal_bytes,
                });
                continue;
            }
            let message = match &record.resume {
                Some(resume) if resume.approved => format!(
                    "the host stopped while this resumed turn was running: the approved tool call `{}` ({}) may or may not have run, and is not run again; send a new input to continue",
                    resume.pending.call.tool_call_id, resume.pending.call.name
                ),
                _ => "the host stopped while this turn was running; send a new input to continue"
                    .to_string(),
            };
            let events = closing_events(batch, id, turn, TurnErrorKind::HostRestarted, &message)?;
            // A queued input waiting for this turn starts now (`queue.rs`).
            let next = finish_turn(batch, id, turn, &events, TurnOutcome::Errored)?;
            recovery.closed.push(id);
            recovery.restarted.extend(next);
        }
        Ok(recovery)
    }
}

/// Closes a running turn that its runner cannot close: one cancelled while
/// no runner holds it (on the embedded engine: accepted during a shutdown,
/// or between its commit and its scheduling), or one whose runner died
/// without its final commit (the runtime's supervisor). Its open messages
/// are closed, then TURN_ERROR `kind`; the session takes input again.
/// 409 when the turn is no longer running (it ended meanwhile).
pub(in crate::store) struct CloseTurn {
    pub session: Uuid,
    pub turn: u32,
    pub kind: TurnErrorKind,
    pub message: String,
}

impl Op for CloseTurn {
    /// The queued input's turn it started, if one waited.
    type Output = Option<TurnTicket>;

    fn tickets(next: &Option<TurnTicket>) -> Vec<TurnTicket> {
        next.iter().cloned().collect()
    }

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Option<TurnTicket>, StoreError> {
        let (id, turn) = (self.session, self.turn);
        let events = closing_events(batch, id, turn, self.kind, &self.message)?;
        finish_turn(batch, id, turn, &events, TurnOutcome::Errored)
    }
}

/// The input of the last turn (`journal`, from its TURN_STARTED on) if that
/// turn left no trace: after its TURN_STARTED only the host's own user
/// message was journaled. Such a turn had no effect (a guest's only effects
/// are journaled host calls), so it can run again. `None` when the turn
/// did something.
fn untouched_turn_input(journal: &[StoredEvent]) -> Result<Option<Value>, StoreError> {
    let Some((start, after)) = journal.split_first() else {
        return Ok(None);
    };
    // Inputs queued meanwhile are the clients' doing, not the turn's.
    let after: Vec<&StoredEvent> = (after.iter())
        .filter(|event| !event.is(EventType::InputQueued))
        .collect();
    if !start.is(EventType::TurnStarted) || after.len() > 3 {
        return Ok(None);
    }
    let mut user_message: Option<String> = None;
    for event in after {
        // The user message's id, if this event is one of its three.
        let message = match event.kind() {
            Some(EventType::MessageStart) => (event.payload::<MessageStart>().map_err(corrupt)?)
                .filter(|start| start.role == Role::User)
                .map(|start| start.message_id),
            Some(EventType::MessageDelta) => {
                (event.payload::<MessageDelta>().map_err(corrupt)?).map(|delta| delta.message_id)
            }
            Some(EventType::MessageEnd) => {
                (event.payload::<MessageEnd>().map_err(corrupt)?).map(|end| end.message_id)
            }
            _ => None,
        };
        let untouched = match (event.is(EventType::MessageStart), message) {
            (true, Some(id)) => {
                user_message = Some(id);
                true
            }
            (false, Some(id)) => user_message.as_ref() == Some(&id),
            (_, None) => false,
        };
        if !untouched {
            return Ok(None);
        }
    }
    let start = start.payload::<TurnStarted>().map_err(corrupt)?;
    Ok(start.map(|start| start.input))
}
