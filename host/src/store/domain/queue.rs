//! Input while a turn runs (`on_busy`): an input sent to a busy session is
//! queued on the session's record and journaled as INPUT_QUEUED in one
//! commit, and the commit that makes the session idle again (the running
//! turn's `finish_turn`, whoever writes it: its runner, a cancel, the
//! recovery after a crash) starts the first queued input as the next turn.
//! So a session is never left idle with inputs waiting, across crashes too:
//! the queue and the turn that drains it change in the same transactions.
//!
//! Order: inputs run in the order they were queued, except that an
//! `interrupt` input goes first (its caller cancels the running turn).
//! While an approval is pending an `enqueue` input waits for the decision
//! and the resumed turn; `interrupt` is refused (decide first). A session
//! that ends drops its queue (SESSION_ENDED is its last event).

use serde_json::Value;
use uuid::Uuid;

use super::turn_start::turn_start_events_for;
use super::{TurnReason, TurnTicket};
use crate::journal::NewEvent;
use crate::journal::payloads::{InputQueued, StartReason};
use crate::store::Cap;
use crate::store::batch::Batch;
use crate::store::records::{QueuedInput, SessionStatus};
use crate::store::{StoreError, now_rfc3339};

/// Inputs one session may hold waiting (docs/limits.md): each is kept on
/// the session's record until its turn starts.
pub(crate) const MAX_QUEUED_INPUTS: usize = 16;

/// What an input does when the session is busy (`POST /sessions/{id}/input`'s `on_busy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnBusy {
    /// Refused with 409 (the contract's default).
    #[default]
    Reject,
    /// Queued: it runs as a turn of its own once the session is idle.
    Enqueue,
    /// Queued first, and the running turn is cancelled (by the caller).
    Interrupt,
}

/// An input that was queued instead of started.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub session_id: Uuid,
    /// The session's turn when it was queued (the one running, or suspended).
    pub turn: u32,
    /// The session's status then: `running` or `awaiting_approval`.
    pub status: SessionStatus,
    pub input_id: String,
    /// Inputs that run before it, counted from 1.
    pub position: u32,
    /// The running turn the caller cancels (`OnBusy::Interrupt` on a running session).
    pub interrupts: Option<u32>,
}

/// Queues `input` on a busy session `id` (running, or awaiting an approval
/// for `OnBusy::Enqueue`): INPUT_QUEUED and the record, in the batch.
pub(super) fn enqueue(
    batch: &mut Batch<'_>,
    id: Uuid,
    input: &Value,
    on_busy: OnBusy,
    schedule_id: Option<Uuid>,
) -> Result<Queued, StoreError> {
    let session = batch.session(id)?;
    let status = session.record.status;
    let interrupt = on_busy == OnBusy::Interrupt;
    if interrupt && status == SessionStatus::PausedBudget {
        return Err(StoreError::Conflict(
            "the session is paused at its LLM budget: raise it (PATCH /sessions/{id}) first (`interrupt` cannot cancel a paused turn)"
                .into(),
        ));
    }
    if interrupt && status == SessionStatus::AwaitingApproval {
        return Err(StoreError::Conflict(
            "the session is awaiting an approval decision: decide it first (`interrupt` cannot cancel a suspended turn)"
                .into(),
        ));
    }
    if session.record.queued.len() >= MAX_QUEUED_INPUTS {
        return Err(StoreError::Quota {
            cap: Cap::QueuedInputs,
            message: format!(
                "session {id} already has {MAX_QUEUED_INPUTS} queued inputs, its limit: retry once one has started"
            ),
        });
    }
    let input_id = format!("inq_{}", Uuid::now_v7().simple());
    let entry = QueuedInput {
        input_id: input_id.clone(),
        input: input.clone(),
        queued_at: now_rfc3339(),
        schedule_id,
    };
    let index = if interrupt {
        0
    } else {
        session.record.queued.len()
    };
    session.record.queued.insert(index, entry);
    session.record.updated_at = now_rfc3339();
    let turn = session.record.turn;
    let position = index as u32 + 1;
    batch.touch(id);
    let event = NewEvent::of(&InputQueued {
        input_id: input_id.clone(),
        input: input.clone(),
        interrupt,
        position,
    });
    batch.write_events(id, &[event])?;
    Ok(Queued {
        session_id: id,
        turn,
        status,
        input_id,
        position,
        interrupts: (interrupt && status == SessionStatus::Running).then_some(turn),
    })
}

/// Starts the session's first queued input as its next turn, if one waits:
/// called by the commit that makes the session idle or errored. The
/// session stays running: the app's running-turns cap counts it as before.
pub(super) fn start_next(
    batch: &mut Batch<'_>,
    id: Uuid,
) -> Result<Option<TurnTicket>, StoreError> {
    let session = batch.session(id)?;
    if session.record.queued.is_empty() {
        return Ok(None);
    }
    let next = session.record.queued.remove(0);
    let turn = session.record.turn + 1;
    let reason = match next.schedule_id {
        Some(schedule_id) => StartReason::Schedule { schedule_id },
        None => StartReason::Input,
    };
    let started_seq = batch.session(id)?.next_seq;
    batch.write_events(id, &turn_start_events_for(turn, &next.input, reason))?;
    batch.touch(id);
    let boot = batch.state.boot;
    let session = batch.session(id)?;
    session.record.turn = turn;
    session.record.status = SessionStatus::Running;
    session.record.boot_id = Some(boot);
    session.record.updated_at = now_rfc3339();
    Ok(Some(TurnTicket {
        session_id: id,
        turn,
        deployment_id: session.record.deployment_id,
        app_slug: session.record.app_slug.clone(),
        route: session.record.route.clone(),
        input: next.input,
        reason: TurnReason::Input,
        started_seq,
        journal_bytes: session.record.journal_bytes,
    }))
}
