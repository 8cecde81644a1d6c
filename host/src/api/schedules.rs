//! `POST|GET /sessions/{id}/schedules`, `DELETE /sessions/{id}/schedules/{schedule_id}`:
//! schedules set through the API, one-shot or cron (platform keys), and one-shot
//! ones of the session's own end user where the app allows it
//! (`end_user_schedules.rs`; docs/schedules.md). The rule and the firing are
//! the store's (`store::domain::schedules`).

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::caller::Caller;
use super::end_user_schedules as by_end_user;
use super::extract::{Json, Path};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::store::{CronRule, ScheduleCreator, ScheduleRecord, now_rfc3339, rfc3339_ms, unix_ms};

/// The body of `POST /sessions/{id}/schedules`: `at` or `cron`.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateSchedule {
    /// Once, at this time: RFC 3339 with a UTC offset. A time already past
    /// fires at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    /// At every time this cron pattern matches (5 fields, or 6 with
    /// seconds first; `@daily` and the like), from now on, until deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    /// The IANA time zone of `cron` (`UTC` when omitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    /// The turn's input, as `POST /sessions/{id}/input` takes it.
    #[serde(default)]
    input: Value,
    /// A cron schedule's end: no firing after this time (RFC 3339 with a
    /// UTC offset); then it is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end_at: Option<String>,
}

/// A schedule that has not fired yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ScheduleView {
    pub id: Uuid,
    pub session_id: Uuid,
    /// When it is next due, RFC 3339 in UTC.
    pub at: String,
    pub input: Value,
    pub created_at: String,
    /// A cron schedule's pattern and time zone (absent for a one-shot one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// No firing after this time (a cron schedule's end), RFC 3339 in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    /// Who made it: a platform key, the agent (a timer), or the session's
    /// end user. Absent for a schedule made before this field existed (by
    /// a platform key or the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<ScheduleCreator>,
}

impl ScheduleView {
    pub(crate) fn of(session_id: Uuid, r: &ScheduleRecord) -> Self {
        ScheduleView {
            id: r.id,
            session_id,
            at: r.at.clone(),
            input: r.input.clone(),
            created_at: r.created_at.clone(),
            cron: r.cron.clone(),
            timezone: r.timezone.clone(),
            end_at: r.end_at.clone(),
            created_by: r.created_by,
        }
    }
}

pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<CreateSchedule>,
) -> Result<(StatusCode, Json<ScheduleView>), ApiError> {
    let session = caller.session(&state, &id).await?;
    let user = caller.user_id();
    if user.is_some() {
        by_end_user::allowed(&state, &session).await?;
        by_end_user::refuse_cron(body.cron.as_deref())?;
    }
    let when = When::off_thread(body.at, body.cron, body.timezone, body.end_at).await?;
    let record = when.record(body.input);
    // The writer decides again, against the session's deployment, and
    // records who made it (`store::By`).
    let record = (state.writer)
        .create_schedule(session.id, record, caller.by())
        .await?;
    let view = ScheduleView::of(session.id, &record);
    Ok((StatusCode::CREATED, Json(view)))
}

/// When a schedule fires, checked: `at`, or `cron` in `timezone`, until `end_at`.
pub(super) struct When {
    due_ms: u64,
    cron: Option<String>,
    timezone: Option<String>,
    end_ms: Option<u64>,
}

impl When {
    pub(super) fn of(
        at: Option<String>,
        cron: Option<String>,
        timezone: Option<String>,
        end_at: Option<String>,
    ) -> Result<When, ApiError> {
        let invalid = |message: String| ApiError::new(ErrorCode::InvalidSchedule, message);
        let end_ms = match &end_at {
            Some(end) => Some(parse_at("end_at", end).map_err(invalid)?),
            None => None,
        };
        let (due_ms, cron, timezone) = match (at, cron, timezone) {
            (Some(at), None, None) => (parse_at("at", &at).map_err(invalid)?, None, None),
            (None, Some(cron), timezone) => {
                let timezone = timezone.unwrap_or_else(|| "UTC".into());
                let rule = CronRule::parse(&cron, &timezone).map_err(invalid)?;
                let now = unix_ms(std::time::SystemTime::now());
                let next = rule
                    .next_after(now)
                    .ok_or_else(|| invalid(format!("`cron` {cron:?} never matches after now")))?;
                (next, Some(cron), Some(timezone))
            }
            _ => {
                return Err(invalid(
                    "give `at` (once) or `cron` (with an optional `timezone`), not both".into(),
                ));
            }
        };
        if end_ms.is_some() && cron.is_none() {
            return Err(invalid(
                "`end_at` ends a `cron` schedule; `at` fires once".into(),
            ));
        }
        if end_ms.is_some_and(|end| end < due_ms) {
            return Err(invalid(
                "`end_at` is before the schedule's first time: it would never fire".into(),
            ));
        }
        Ok(When {
            due_ms,
            cron,
            timezone,
            end_ms,
        })
    }

    /// `of` on the blocking pool: finding a cron pattern's next time may
    /// search years ahead (a date that comes rarely, or never), which must
    /// not hold an async worker.
    pub(super) async fn off_thread(
        at: Option<String>,
        cron: Option<String>,
        timezone: Option<String>,
        end_at: Option<String>,
    ) -> Result<When, ApiError> {
        tokio::task::spawn_blocking(move || When::of(at, cron, timezone, end_at))
            .await
            .map_err(|err| ApiError::internal(format!("checking a schedule's times: {err}")))?
    }

    /// A new schedule with `input`, firing then.
    pub(super) fn record(self, input: Value) -> ScheduleRecord {
        ScheduleRecord {
            id: Uuid::now_v7(),
            at: rfc3339_ms(self.due_ms),
            due_ms: self.due_ms,
            input,
            created_at: now_rfc3339(),
            cron: self.cron,
            timezone: self.timezone,
            end_at: self.end_ms.map(rfc3339_ms),
            end_ms: self.end_ms,
            route: None,
            created_by: Some(ScheduleCreator::Platform),
        }
    }
}

/// `at` (the field `what`) as Unix ms.
fn parse_at(what: &str, at: &str) -> Result<u64, String> {
    let at = chrono::DateTime::parse_from_rfc3339(at).map_err(|err| {
        format!("`{what}` is not an RFC 3339 time ({err}): e.g. 2026-12-01T09:00:00Z")
    })?;
    u64::try_from(at.timestamp_millis()).map_err(|_| format!("`{what}` is before 1970"))
}

/// The session's schedules that have not fired, soonest first.
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<ScheduleView>>, ApiError> {
    let session = caller.session(&state, &id).await?;
    if caller.user_id().is_some() {
        by_end_user::allowed(&state, &session).await?;
    }
    let views = (session.schedules.iter())
        .map(|r| ScheduleView::of(session.id, r))
        .collect();
    Ok(Json(views))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, schedule)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let session = caller.session(&state, &id).await?;
    let not_found = || {
        ApiError::new(
            ErrorCode::ScheduleNotFound,
            format!("schedule `{schedule}` not found"),
        )
    };
    let schedule_id = Uuid::parse_str(&schedule).map_err(|_| not_found())?;
    if caller.user_id().is_some() {
        by_end_user::allowed(&state, &session).await?;
        // Only a schedule an end user made, as read here: who made a
        // schedule never changes, and one not read here is not deleted.
        let found = session.schedules.iter().find(|s| s.id == schedule_id);
        by_end_user::may_delete(found.ok_or_else(not_found)?)?;
    }
    state
        .writer
        .delete_schedule(session.id, schedule_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
