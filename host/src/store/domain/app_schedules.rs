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

use uuid::Uuid;

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
