//! `POST|GET /sessions/{id}/schedules`, `DELETE /sessions/{id}/schedules/{schedule_id}`:
//! one-shot schedules set through the API (platform keys; docs/schedules.md).
//! The rule and the firing are the store's (`store::domain::schedules`).

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use utoipa::ToSchema;
use uuid::Uuid;

use super::extract::{Json, Path};
use super::sessions::visible_session;
use super::{ApiError, AppState};
use crate::keys::Principal;
use crate::store::{ScheduleRecord, now_rfc3339};

/// The body of `POST /sessions/{id}/schedules`.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateSchedule {
    /// When the input becomes a turn: RFC 3339 with a UTC offset. A time
    /// already past fires at once.
    at: String,
    /// The turn's input, as `POST /sessions/{id}/input` takes it.
    #[serde(default)]
    input: Value,
}

/// A schedule that has not fired yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct ScheduleView {
    pub id: Uuid,
    pub session_id: Uuid,
    /// When it is due, RFC 3339 in UTC.
    pub at: String,
    pub input: Value,
    pub created_at: String,
}

impl ScheduleView {
    pub(crate) fn of(session_id: Uuid, r: &ScheduleRecord) -> Self {
        ScheduleView {
            id: r.id,
            session_id,
            at: r.at.clone(),
            input: r.input.clone(),
            created_at: r.created_at.clone(),
        }
    }
}

pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<CreateSchedule>,
) -> Result<(StatusCode, Json<ScheduleView>), ApiError> {
    let session = visible_session(&state, &principal, &id).await?;
    let at = OffsetDateTime::parse(&body.at, &Rfc3339).map_err(|err| {
        ApiError::unprocessable(
            "invalid_schedule",
            format!("`at` is not an RFC 3339 time ({err}): e.g. 2026-12-01T09:00:00Z"),
        )
    })?;
    let due_ms = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).map_err(|_| {
        ApiError::unprocessable("invalid_schedule", "`at` is before 1970".to_string())
    })?;
    let due = std::time::UNIX_EPOCH + std::time::Duration::from_millis(due_ms);
    let record = ScheduleRecord {
        id: Uuid::now_v7(),
        at: humantime::format_rfc3339_millis(due).to_string(),
        due_ms,
        input: body.input,
        created_at: now_rfc3339(),
    };
    let record = state.writer.create_schedule(session.id, record).await?;
    let view = ScheduleView::of(session.id, &record);
    Ok((StatusCode::CREATED, Json(view)))
}

/// The session's schedules that have not fired, soonest first.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Vec<ScheduleView>>, ApiError> {
    let session = visible_session(&state, &principal, &id).await?;
    let views = (session.schedules.iter())
        .map(|r| ScheduleView::of(session.id, r))
        .collect();
    Ok(Json(views))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((id, schedule)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let session = visible_session(&state, &principal, &id).await?;
    let not_found = || {
        ApiError::not_found(
            "schedule_not_found",
            format!("schedule `{schedule}` not found"),
        )
    };
    let schedule_id = Uuid::parse_str(&schedule).map_err(|_| not_found())?;
    state
        .writer
        .delete_schedule(session.id, schedule_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
