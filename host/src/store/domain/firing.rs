//! Firing a due schedule, once (`docs/schedules.md`): the scanner
//! (`crate::schedules`) hands the writer each due row of the index. A
//! session's schedule is taken off its record (a cron one goes back on it,
//! due at its next time after now) and its input starts a turn (reason
//! `schedule`) or is queued when the session is busy, in one commit; an
//! app's row (`ScheduleOwner::App`) is an app's schedule (`app_schedules.rs`),
//! whose firing creates a new session. A second firing of the same schedule
//! (another host, a retry) finds it gone and does nothing: exactly once.

use std::time::SystemTime;

use serde_json::Value;
use uuid::Uuid;

use super::by::By;
use super::clock::{rfc3339_ms, unix_ms};
use super::cron::next_due;
use super::queue::OnBusy;
use super::sessions::{CreateSession, InputOutcome, PostInput};
use crate::journal::payloads::StartReason;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::engine::ScheduleOwner;
use crate::store::records::{ScheduleCreator, ScheduleRecord, SessionStatus};
use crate::store::start::TurnTicket;

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
            ScheduleOwner::App(app) => return fire_app(batch, app, schedule, due_ms),
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
                    let creator = record.created_by.unwrap_or(ScheduleCreator::Platform);
                    // The agent's timer on an end user's session is one of
                    // her turns (counted below).
                    let counted = owner.filter(|_| creator == ScheduleCreator::Agent);
                    (
                        (record.input.clone(), creator, counted),
                        ended,
                        past_end(record),
                    )
                })
            }
            // The session is gone since the row was read: a leftover row,
            // which the app's firing drops as it finds no app either.
            Err(StoreError::NotFound { .. }) => {
                return fire_app(batch, id, schedule, due_ms);
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
        let (input, creator, counted): (Value, ScheduleCreator, Option<String>) = match found {
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
            // as their input would; it stays due while they refuse it. So
            // does the agent's timer on their session: it fires as theirs.
            by: By::Schedule {
                creator: if counted.is_some() {
                    ScheduleCreator::EndUser
                } else {
                    creator
                },
            },
        };
        let outcome = match counted {
            // One of the end user's turns (`turns_per_minute_per_user`):
            // past their share it stays due (`Throttled`), as a cap keeps it.
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

/// Fires the schedule `schedule` of the app `app_id`, due at `due_ms`, if
/// it is there (`FireSchedule` found no session of that id).
fn fire_app(
    batch: &mut Batch<'_>,
    app_id: Uuid,
    schedule: Uuid,
    due_ms: u64,
) -> Result<Fired, StoreError> {
    let Some(mut app) = batch.tx.app_for_update(&app_id.to_string())? else {
        // Neither a session nor an app: only the index row is left.
        batch.tx.remove_schedule_due(due_ms, app_id, schedule)?;
        return Ok(Fired::Dropped);
    };
    let Some(index) = (app.schedules.iter()).position(|s| s.id == schedule && s.due_ms == due_ms)
    else {
        batch.tx.remove_schedule_due(due_ms, app_id, schedule)?;
        return Ok(Fired::Dropped);
    };
    let mut record = app.schedules.remove(index);
    let ended = record.end_ms.is_some_and(|end| due_ms > end);
    let fired = if ended {
        Fired::Dropped
    } else {
        let mut create = CreateSession {
            app: app.slug.clone(),
            route: record.route.clone().unwrap_or_default(),
            input: record.input.clone(),
            by: By::Schedule {
                creator: ScheduleCreator::Platform,
            },
            reason: StartReason::Schedule {
                schedule_id: schedule,
            },
        };
        match create.apply(batch) {
            Ok((session, ticket)) => Fired::Session(session.id, ticket),
            // A cap: nothing changed; the scanner tries again.
            Err(err @ StoreError::Quota { .. }) => return Err(err),
            // The app cannot take it as it stands: missed, the schedule moves on.
            Err(err @ (StoreError::NotFound { .. } | StoreError::Conflict(_))) => {
                Fired::Missed(err.to_string())
            }
            Err(err) => return Err(err),
        }
    };
    batch.tx.remove_schedule_due(due_ms, app_id, schedule)?;
    if let Some(next) = next_due(&record, due_ms, unix_ms(SystemTime::now())) {
        record.due_ms = next;
        record.at = rfc3339_ms(next);
        batch.tx.put_schedule_due(next, app_id, schedule)?;
        let at = (app.schedules).partition_point(|s| s.due_ms <= next);
        app.schedules.insert(at, record);
    }
    batch.tx.put_app(&app, false)?;
    Ok(fired)
}
