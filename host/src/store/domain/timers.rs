//! Timers an agent set during a turn (`schedule` and `cancel-schedule` of
//! `wit/agent.wit`; docs/schedules.md): held by the turn until its final
//! commit, which applies them, journaling TURN_SCHEDULE_CANCELLED and
//! TURN_SCHEDULED just before the turn's last event. Only a turn that
//! commits well (TURN_ENDED, or a suspension) applies them: a failed or
//! cancelled turn, or one whose events could not all be recorded,
//! schedules and cancels nothing. Once applied, a timer is a schedule like
//! one set through the API (`schedules.rs`): it fires once, queued when busy.

use uuid::Uuid;

use super::TurnOutcome;
use crate::journal::NewEvent;
use crate::journal::payloads::{TurnScheduleCancelled, TurnScheduled};
use crate::store::StoreError;
use crate::store::batch::Batch;
use crate::store::records::{ScheduleCreator, ScheduleRecord};

/// Schedules one turn may make (docs/limits.md); cancels are bounded by
/// the session's schedules, since only a pending one can be cancelled.
pub(crate) const MAX_TURN_SCHEDULES: usize = 10;

/// What a turn asked for, in its final commit.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnTimers {
    /// New one-shot schedules, in the order the agent made them.
    pub scheduled: Vec<ScheduleRecord>,
    /// Schedules of the session (made before this turn) to delete.
    pub cancelled: Vec<Uuid>,
}

impl TurnTimers {
    pub(crate) fn is_empty(&self) -> bool {
        self.scheduled.is_empty() && self.cancelled.is_empty()
    }
}

/// Applies `timers` of the session `id`'s turn ending with `outcome`, and
/// returns the events that say so (none for a turn that does not keep
/// them). A cancelled schedule that fired or was deleted meanwhile is not
/// journaled: the firing won.
pub(super) fn apply(
    batch: &mut Batch<'_>,
    id: Uuid,
    timers: &TurnTimers,
    outcome: &TurnOutcome,
) -> Result<Vec<NewEvent>, StoreError> {
    if timers.is_empty()
        || !matches!(
            outcome,
            TurnOutcome::Ended | TurnOutcome::Suspended(_) | TurnOutcome::BudgetPaused(_)
        )
    {
        return Ok(Vec::new());
    }
    let mut events = Vec::new();
    for &schedule in &timers.cancelled {
        let session = batch.session(id)?;
        let schedules = &mut session.record.schedules;
        let Some(index) = schedules.iter().position(|s| s.id == schedule) else {
            continue;
        };
        let removed = schedules.remove(index);
        batch.tx.remove_schedule_due(removed.due_ms, id, schedule)?;
        events.push(NewEvent::of(&TurnScheduleCancelled {
            schedule_id: schedule,
        }));
    }
    for record in &timers.scheduled {
        let session = batch.session(id)?;
        let schedules = &mut session.record.schedules;
        let at = schedules.partition_point(|s| s.due_ms <= record.due_ms);
        let kept = ScheduleRecord {
            created_by: Some(ScheduleCreator::Agent),
            ..record.clone()
        };
        schedules.insert(at, kept);
        batch.tx.put_schedule_due(record.due_ms, id, record.id)?;
        events.push(NewEvent::of(&TurnScheduled {
            schedule_id: record.id,
            at: record.at.clone(),
            input: record.input.clone(),
        }));
    }
    batch.touch(id);
    Ok(events)
}
