//! Schedules set through the API, one-shot or cron, (`docs/schedules.md`): an input
//! the session gets as a turn at a given time. A schedule lives on its
//! session's record (so the session's row lock on PostgreSQL decides who
//! fires it, and deleting the session drops it) plus one row in the
//! engine's due index, which the scanner (`crate::schedules`) reads.
//!
//! Firing is a command like any input (`firing.rs`).

use uuid::Uuid;

use super::by::By;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::records::{ScheduleRecord, SessionStatus};
use crate::store::{Cap, Missing};

/// Schedules one session may hold (docs/limits.md): each waits on the
/// session's record until it fires or is deleted.
pub(crate) const MAX_SCHEDULES: usize = 100;

/// Adds a schedule to a session that has not ended. One set by the
/// session's own end user (`by`) needs the session's deployment to say
/// `[end_users] schedules = true` and is one-shot (403 otherwise); it is
/// counted against their share of turns (`[end_users]
/// turns_per_minute_per_user`, as their inputs are) since it will start
/// one, and a refusal of the creation (the session ended, its 100
/// schedules) gives the place back. The record's `created_by` is `by`'s.
pub(crate) struct CreateSchedule {
    pub session: Uuid,
    pub record: ScheduleRecord,
    pub by: By,
}

impl Op for CreateSchedule {
    type Output = ScheduleRecord;

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<ScheduleRecord, StoreError> {
        let id = self.session;
        let session = batch.session(id)?.record.clone();
        let Some(user) = self.by.user().map(str::to_string) else {
            return self.add(batch);
        };
        // Only the session's owner (the API checked it; a session's owner
        // never changes, so this holds in the commit too).
        if session.end_user.as_deref() != Some(user.as_str()) {
            return Err(StoreError::not_found(Missing::Session, id));
        }
        let deployment = (batch.tx.deployment(session.deployment_id)?).ok_or_else(|| {
            crate::store::error::corrupt(format!(
                "deployment {} of session {id} is missing",
                session.deployment_id
            ))
        })?;
        // The app's policy is its current deployment's, read in this commit.
        let current = super::deployments::current_deployment(batch, session.app_id)?;
        let cron = self.record.cron.is_some();
        let policy = current.as_ref().unwrap_or(&deployment);
        self.record.created_by = Some(self.by.schedule_creator(policy, cron)?);
        super::end_users::counted(batch, session.app_id, &user, &deployment, |batch| {
            self.add(batch)
        })
    }
}

impl CreateSchedule {
    /// Adds the schedule once its caller may set it.
    fn add(&mut self, batch: &mut Batch<'_>) -> Result<ScheduleRecord, StoreError> {
        let id = self.session;
        let session = batch.session(id)?;
        if session.record.status == SessionStatus::Ended {
            return Err(StoreError::Conflict(
                "the session has ended and accepts no more input".into(),
            ));
        }
        if session.record.schedules.len() >= MAX_SCHEDULES {
            return Err(StoreError::Quota {
                cap: Cap::Schedules,
                message: format!(
                    "session {id} already has {MAX_SCHEDULES} schedules, its limit: delete one first"
                ),
            });
        }
        let record = self.record.clone();
        let schedules = &mut session.record.schedules;
        let at = schedules.partition_point(|s| s.due_ms <= record.due_ms);
        schedules.insert(at, record.clone());
        batch.touch(id);
        batch.tx.put_schedule_due(record.due_ms, id, record.id)?;
        Ok(record)
    }
}

/// Drops every schedule of the session `id` (it ended): off its record
/// and out of the due index, so none is listed or due any more.
pub(super) fn drop_all(batch: &mut Batch<'_>, id: Uuid) -> Result<(), StoreError> {
    let dropped = std::mem::take(&mut batch.session(id)?.record.schedules);
    for schedule in &dropped {
        batch
            .tx
            .remove_schedule_due(schedule.due_ms, id, schedule.id)?;
    }
    batch.touch(id);
    Ok(())
}

/// Deletes a schedule that has not fired.
pub(crate) struct DeleteSchedule {
    pub session: Uuid,
    pub schedule: Uuid,
}

impl Op for DeleteSchedule {
    type Output = ();

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let (id, schedule) = (self.session, self.schedule);
        let session = batch.session(id)?;
        let schedules = &mut session.record.schedules;
        let Some(index) = schedules.iter().position(|s| s.id == schedule) else {
            return Err(StoreError::not_found(Missing::Schedule, schedule));
        };
        let removed = schedules.remove(index);
        batch.touch(id);
        batch.tx.remove_schedule_due(removed.due_ms, id, schedule)
    }
}
