//! App-level schedules (`POST /apps/{id}/schedules`; docs/schedules.md):
//! each firing creates a **new** session of the app on the schedule's
//! route with its input, whose first TURN_STARTED says reason `schedule`.
//!
//! A schedule lives on its app's record (`AppRecord::schedules`; on
//! PostgreSQL the app's row is locked while it is read and written back)
//! plus one row of the schedules' due index, keyed by the app's id where a
//! session schedule's row has its session's: the engine reads it as a
//! `ScheduleOwner::App` (no session of that id) and `FireSchedule` fires the
//! app's schedule here. Firing takes it
//! off the record (a cron one goes back, due at its next time, unless past
//! its `end_at`) and creates the session in the same commit: exactly once.
//! A firing the app cannot take now (its running-turns or open-sessions
//! cap) stays due; one it can never take as it stands (no active
//! deployment, the route gone) is missed: logged, and the schedule moves on.

use std::time::SystemTime;

use uuid::Uuid;

use super::idempotency::unix_ms;
use super::schedules::{Fired, next_due};
use super::sessions::CreateSession;
use crate::journal::payloads::StartReason;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::records::ScheduleRecord;
use crate::store::{Cap, Missing};

/// Schedules one app may hold (docs/limits.md).
pub(crate) const MAX_APP_SCHEDULES: usize = 100;

fn app_not_found(app: &str) -> StoreError {
    StoreError::not_found(Missing::App, app)
}

/// Adds a schedule to an app (`record.route` set).
pub(crate) struct CreateAppSchedule {
    /// The app's id or slug.
    pub app: String,
    pub record: ScheduleRecord,
}

impl Op for CreateAppSchedule {
    type Output = (Uuid, ScheduleRecord);

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError> {
        let mut app =
            (batch.tx.app_for_update(&self.app)?).ok_or_else(|| app_not_found(&self.app))?;
        if app.schedules.len() >= MAX_APP_SCHEDULES {
            return Err(StoreError::Quota {
                cap: Cap::Schedules,
                message: format!(
                    "app `{}` already has {MAX_APP_SCHEDULES} schedules, its limit: delete one first",
                    app.slug
                ),
            });
        }
        let record = self.record.clone();
        let at = (app.schedules).partition_point(|s| s.due_ms <= record.due_ms);
        app.schedules.insert(at, record.clone());
        batch
            .tx
            .put_schedule_due(record.due_ms, app.id, record.id)?;
        batch.tx.put_app(&app, false)?;
        Ok((app.id, record))
    }
}

/// Deletes an app's schedule.
pub(crate) struct DeleteAppSchedule {
    pub app: String,
    pub schedule: Uuid,
}

impl Op for DeleteAppSchedule {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let mut app =
            (batch.tx.app_for_update(&self.app)?).ok_or_else(|| app_not_found(&self.app))?;
        let Some(index) = app.schedules.iter().position(|s| s.id == self.schedule) else {
            return Err(StoreError::not_found(Missing::Schedule, self.schedule));
        };
        let removed = app.schedules.remove(index);
        batch
            .tx
            .remove_schedule_due(removed.due_ms, app.id, removed.id)?;
        batch.tx.put_app(&app, false)
    }
}

/// Fires the schedule `schedule` of the app `app_id`, due at `due_ms`, if
/// it is there (`FireSchedule` of a `ScheduleOwner::App` row, or of a
/// session gone since its row was read: a leftover, dropped).
pub(super) fn fire(
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
            end_user: None,
            reason: StartReason::Schedule {
                schedule_id: schedule,
            },
            public: false,
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
        record.at = super::schedules::rfc3339_ms(next);
        batch.tx.put_schedule_due(next, app_id, schedule)?;
        let at = (app.schedules).partition_point(|s| s.due_ms <= next);
        app.schedules.insert(at, record);
    }
    batch.tx.put_app(&app, false)?;
    Ok(fired)
}
