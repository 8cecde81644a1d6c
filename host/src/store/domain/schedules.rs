//! Schedules set through the API, one-shot or cron, (`docs/schedules.md`): an input
//! the session gets as a turn at a given time. A schedule lives on its
//! session's record (so the session's row lock on PostgreSQL decides who
//! fires it, and deleting the session drops it) plus one row in the
//! engine's due index, which the scanner (`crate::schedules`) reads.
//!
//! Firing is a command like any input: it takes the schedule off the record
//! (a cron schedule goes back on it, due at its next time after now) and
//! starts its turn (reason `schedule`), or queues it when the session is
//! busy, in one commit. A second firing of the same schedule (another
//! host, a retry) finds it gone and does nothing: exactly once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use uuid::Uuid;

use super::cron::CronRule;
use super::idempotency::unix_ms;
use super::queue::OnBusy;
use super::sessions::{InputOutcome, PostInput};
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::engine::ScheduleOwner;
use crate::store::records::{ScheduleCreator, ScheduleRecord, SessionStatus};
use crate::store::start::TurnTicket;
use crate::store::{Cap, Missing};

/// Schedules one session may hold (docs/limits.md): each waits on the
/// session's record until it fires or is deleted.
pub(crate) const MAX_SCHEDULES: usize = 100;

/// Unix ms as RFC 3339 (UTC, milliseconds), as a schedule's `at` shows it.
pub(crate) fn rfc3339_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// Adds a schedule to a session that has not ended.
pub(crate) struct CreateSchedule {
    pub session: Uuid,
    pub record: ScheduleRecord,
}

impl Op for CreateSchedule {
    type Output = ScheduleRecord;

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<ScheduleRecord, StoreError> {
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

/// A schedule set by the session's own end user `user`: one-shot (the API
/// refuses them `cron`), counted against their share of turns
/// (`[end_users] turns_per_minute_per_user`, of the session's deployment,
/// as their inputs are) since it will start one; a refusal of the creation
/// (the session ended, its 100 schedules) gives the place back.
pub(crate) struct UserCreateSchedule {
    pub create: CreateSchedule,
    pub user: String,
}

impl Op for UserCreateSchedule {
    type Output = ScheduleRecord;

    fn session(&self) -> Option<Uuid> {
        Some(self.create.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<ScheduleRecord, StoreError> {
        let id = self.create.session;
        let record = batch.session(id)?.record.clone();
        // Only the session's owner (the API checked it; a session's owner
        // never changes, so this holds in the commit too).
        if record.end_user.as_deref() != Some(self.user.as_str()) {
            return Err(StoreError::not_found(Missing::Session, id));
        }
        let deployment = (batch.tx.deployment(record.deployment_id)?).ok_or_else(|| {
            crate::store::error::corrupt(format!(
                "deployment {} of session {id} is missing",
                record.deployment_id
            ))
        })?;
        let create = &mut self.create;
        super::end_users::counted(batch, record.app_id, &self.user, &deployment, |batch| {
            create.apply(batch)
        })
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

/// Fires a due schedule: `due_ms` is the due time its index row names.
pub(crate) struct FireSchedule {
    pub owner: ScheduleOwner,
    pub schedule: Uuid,
    pub due_ms: u64,
}

/// What a firing did.
#[derive(Debug, Clone)]
pub(crate) enum Fired {
    /// Its turn started, or it waits in the session's queue.
    Input(InputOutcome),
    /// Nothing to fire: deleted, fired already, past its `end_at`, or its
    /// session is gone or ended.
    Dropped,
    /// An app's schedule created this session, whose first turn started
    /// (`app_schedules.rs`).
    Session(Uuid, TurnTicket),
    /// An app's schedule the app could not take (no active deployment, the
    /// route gone), and why: this firing is lost, the schedule moves on.
    Missed(String),
}

/// When a schedule that was due at `due_ms` is due next, firing at
/// `now_ms`: a cron schedule's next time after both (one firing however
/// many times passed while no server ran), unless that is past its
/// `end_at`; a one-shot schedule never.
pub(super) fn next_due(record: &ScheduleRecord, due_ms: u64, now_ms: u64) -> Option<u64> {
    let cron = record.cron.as_deref()?;
    let rule = CronRule::parse(cron, record.timezone.as_deref().unwrap_or("UTC")).ok()?;
    let next = rule.next_after(now_ms.max(due_ms))?;
    match record.end_ms {
        Some(end) if next > end => None,
        _ => Some(next),
    }
}

impl Op for FireSchedule {
    type Output = Fired;

    fn session(&self) -> Option<Uuid> {
        match self.owner {
            ScheduleOwner::Session(id) => Some(id),
            // An app's firing locks the app's row as it reads it.
            ScheduleOwner::App(_) => None,
        }
    }

    fn tickets(fired: &Fired) -> Vec<TurnTicket> {
        match fired {
            Fired::Input(outcome) => PostInput::tickets(outcome),
            Fired::Session(_, ticket) => vec![ticket.clone()],
            Fired::Dropped | Fired::Missed(_) => Vec::new(),
        }
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Fired, StoreError> {
        let (schedule, due_ms) = (self.schedule, self.due_ms);
        let id = match self.owner {
            ScheduleOwner::App(app) => {
                return super::app_schedules::fire(batch, app, schedule, due_ms);
            }
            ScheduleOwner::Session(id) => id,
        };
        let found = match batch.session(id) {
            Ok(session) => {
                let ended = session.record.status == SessionStatus::Ended;
                let owner = session.record.end_user.clone();
                let record = (session.record.schedules.iter())
                    .find(|s| s.id == schedule && s.due_ms == due_ms);
                // Past its `end_at` (a cron schedule late after downtime): dropped.
                let past_end = |r: &ScheduleRecord| r.end_ms.is_some_and(|end| due_ms > end);
                record.map(|record| {
                    // An end user's is theirs: public, as their input is; so
                    // is the agent's timer on their session (counted below).
                    let agents = record.created_by == Some(ScheduleCreator::Agent);
                    let counted = owner.clone().filter(|_| agents);
                    let public =
                        record.created_by == Some(ScheduleCreator::EndUser) || counted.is_some();
                    (
                        (record.input.clone(), public, counted),
                        ended,
                        past_end(record),
                    )
                })
            }
            // The session is gone since the row was read: a leftover row,
            // which the app's firing drops as it finds no app either.
            Err(StoreError::NotFound { .. }) => {
                return super::app_schedules::fire(batch, id, schedule, due_ms);
            }
            Err(err) => return Err(err),
        };
        // A full journal takes no input ever again: no firing to retry.
        let found = match found {
            Some((input, false, false)) => {
                Some((input, false, super::journal_cap::full(batch, id)?))
            }
            other => other,
        };
        let (input, public, counted): (Value, bool, Option<String>) = match found {
            Some((input, false, false)) => input,
            Some((_, _, _)) | None => {
                // Only the index row is left of it (or, on an ended session,
                // past its end or with a full journal, nothing else runs it).
                if let Ok(session) = batch.session(id) {
                    session.record.schedules.retain(|s| s.id != schedule);
                    batch.touch(id);
                }
                batch.tx.remove_schedule_due(due_ms, id, schedule)?;
                return Ok(Fired::Dropped);
            }
        };
        // First what may refuse (a cap: nothing changed, the scanner tries again).
        let mut start = PostInput {
            session: id,
            input,
            on_busy: OnBusy::Enqueue,
            schedule: Some(schedule),
            // An end user's schedule fires under the app's caps for what
            // ships in frontends (`--invocation-max-running-turns-per-app`),
            // as their input would; it stays due while they refuse it.
            public,
        };
        let outcome = match counted {
            // An agent's timer on an end user's session is one of their
            // turns (`turns_per_minute_per_user`): past their share it stays
            // due (`Throttled`), as a cap keeps it.
            Some(user) => {
                let record = &batch.session(id)?.record;
                let (app, deployment_id) = (record.app_id, record.deployment_id);
                let deployment = (batch.tx.deployment(deployment_id)?).ok_or_else(|| {
                    crate::store::error::corrupt(format!(
                        "deployment {deployment_id} of session {id} is missing"
                    ))
                })?;
                super::end_users::counted(batch, app, &user, &deployment, |batch| {
                    start.apply(batch)
                })?
            }
            None => start.apply(batch)?,
        };
        let session = batch.session(id)?;
        let schedules = &mut session.record.schedules;
        let Some(index) = schedules.iter().position(|s| s.id == schedule) else {
            return Err(StoreError::Corrupt("a schedule left while it fired".into()));
        };
        let mut record = schedules.remove(index);
        batch.tx.remove_schedule_due(due_ms, id, schedule)?;
        // A cron schedule is due again at its next time after now: one
        // firing however many times passed while no server ran.
        if let Some(next) = next_due(&record, due_ms, unix_ms(SystemTime::now())) {
            record.due_ms = next;
            record.at = rfc3339_ms(next);
            batch.tx.put_schedule_due(next, id, schedule)?;
            let session = batch.session(id)?;
            let schedules = &mut session.record.schedules;
            let at = schedules.partition_point(|s| s.due_ms <= next);
            schedules.insert(at, record);
        }
        batch.touch(id);
        Ok(Fired::Input(outcome))
    }
}
