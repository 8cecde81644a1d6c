//! What the session's own end user may do with its schedules
//! (`schedules.rs`; docs/schedules.md, "End users' schedules"): only where
//! the app's `[end_users] schedules = true`, one-shot `at` schedules only,
//! and delete only those an end user made. Their own session is checked
//! before (`Caller::session`: another's is 404). The writer decides again
//! against the session's deployment (`store::By::schedule_creator`).

use super::{ApiError, AppState, ErrorCode};
use crate::store::{ScheduleCreator, ScheduleRecord, SessionRecord};

/// 403 unless the current deployment of the session's app says
/// `[end_users] schedules = true`.
pub(super) async fn allowed(state: &AppState, session: &SessionRecord) -> Result<(), ApiError> {
    let policy = super::caller::policy(state, session.app_id).await?;
    if policy.is_some_and(|p| p.schedules) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::SchedulesNotAllowed,
        "this app does not let its end users schedule (its manifest's `[end_users] schedules = true` would); a platform key may",
    ))
}

/// 403 for a `cron` schedule: a recurring schedule is standing load the
/// app's backend should own (a platform key, or an app schedule), and
/// would start turns past the user's share of turns.
pub(super) fn refuse_cron(cron: Option<&str>) -> Result<(), ApiError> {
    match cron {
        None => Ok(()),
        Some(_) => Err(ApiError::new(
            ErrorCode::CronNotAllowed,
            "an end user sets one-shot schedules only (`at`): a recurring `cron` schedule is the app backend's to set, with a platform key",
        )),
    }
}

/// 403 unless an end user made `schedule` (the agent's timers and the
/// platform's schedules are not theirs to delete).
pub(super) fn may_delete(schedule: &ScheduleRecord) -> Result<(), ApiError> {
    if schedule.created_by == Some(ScheduleCreator::EndUser) {
        return Ok(());
    }
    let by = match schedule.created_by {
        Some(ScheduleCreator::Agent) => "the agent",
        _ => "a platform key",
    };
    Err(ApiError::new(
        ErrorCode::ScheduleNotDeletable,
        format!(
            "this schedule was made by {by}: an end user deletes only schedules an end user made"
        ),
    ))
}
