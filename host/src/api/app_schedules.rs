//! `POST|GET /apps/{id}/schedules`, `DELETE /apps/{id}/schedules/{schedule_id}`:
//! app-level schedules (platform keys; docs/schedules.md): each firing
//! creates a new session of the app. The rule and the firing are the
//! store's (`store::domain::app_schedules`).

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::extract::{Json, Path};
use super::schedules::When;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::store::Missing;
use crate::store::ScheduleRecord;

/// The body of `POST /apps/{id}/schedules`: `route`, and `at` or `cron`.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateAppSchedule {
    /// The route each firing's new session is created on, e.g. `/chat`.
    route: String,
    /// Once, at this time: RFC 3339 with a UTC offset. A time already past
    /// fires at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    /// At every time this cron pattern matches (5 fields, or 6 with
    /// seconds first; `@daily` and the like), until deleted or `end_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    /// The IANA time zone of `cron` (`UTC` when omitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    /// Each new session's input, as `POST /sessions` takes it.
    #[serde(default)]
    input: Value,
    /// A cron schedule's end: no firing after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end_at: Option<String>,
}

/// An app's schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub(crate) struct AppScheduleView {
    pub id: Uuid,
    pub app_id: Uuid,
    pub route: String,
    /// When it is next due, RFC 3339 in UTC.
    pub at: String,
    pub input: Value,
    pub created_at: String,
    /// A cron schedule's pattern and time zone (absent for a one-shot one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// No firing after this time, RFC 3339 in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
}

impl AppScheduleView {
    pub(crate) fn of(app_id: Uuid, r: &ScheduleRecord) -> Self {
        AppScheduleView {
            id: r.id,
            app_id,
            route: r.route.clone().unwrap_or_default(),
            at: r.at.clone(),
            input: r.input.clone(),
            created_at: r.created_at.clone(),
            cron: r.cron.clone(),
            timezone: r.timezone.clone(),
            end_at: r.end_at.clone(),
        }
    }
}

fn app_not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::AppNotFound, format!("app `{id}` not found"))
}

pub(super) async fn create(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(body): Json<CreateAppSchedule>,
) -> Result<(StatusCode, Json<AppScheduleView>), ApiError> {
    let when = When::off_thread(body.at, body.cron, body.timezone, body.end_at).await?;
    let record = ScheduleRecord {
        route: Some(body.route),
        ..when.record(body.input)
    };
    // The route is checked at each firing (a later deployment may change
    // the routes); the app must exist now.
    let (app_id, record) =
        (state.writer.create_app_schedule(id.clone(), record).await).map_err(|err| match err {
            crate::store::StoreError::NotFound {
                what: Missing::App, ..
            } => app_not_found(&id),
            err => err.into(),
        })?;
    Ok((
        StatusCode::CREATED,
        Json(AppScheduleView::of(app_id, &record)),
    ))
}

/// The app's schedules, soonest first.
pub(super) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<AppScheduleView>>, ApiError> {
    let key = id.clone();
    let app = (state.store.read(move |s| s.app(&key)).await?).ok_or_else(|| app_not_found(&id))?;
    let views = (app.schedules.iter())
        .map(|r| AppScheduleView::of(app.id, r))
        .collect();
    Ok(Json(views))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Path((id, schedule)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let not_found = || {
        ApiError::new(
            ErrorCode::ScheduleNotFound,
            format!("schedule `{schedule}` not found"),
        )
    };
    let schedule_id = Uuid::parse_str(&schedule).map_err(|_| not_found())?;
    match state
        .writer
        .delete_app_schedule(id.clone(), schedule_id)
        .await
    {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(crate::store::StoreError::NotFound {
            what: Missing::App, ..
        }) => Err(app_not_found(&id)),
        Err(err) => Err(err.into()),
    }
}
