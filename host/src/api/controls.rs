//! An operator's hands on a session: `POST /sessions/{id}/cancel` stops the
//! running turn, `POST /sessions/{id}/end` ends the session and
//! `DELETE /sessions/{id}` removes it (both cancel a running turn first);
//! `PATCH /sessions/{id}` sets its LLM budget (and resumes a session paused
//! at it).

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use super::caller::Caller;
use super::extract::{Json, OptionalJson, Path};
use super::views::SessionView;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::Principal;
use crate::store::{SessionRecord, SessionStatus};

/// Longest `reason` of `POST /sessions/{id}/end`, in bytes.
const MAX_REASON_BYTES: usize = 1024;

/// Who stopped a turn, as its TURN_ERROR names them: a role, never a
/// key's id or name, since the session's end user reads that event (the
/// key is in the log, which only the operator reads).
pub(super) fn canceller(principal: &Principal) -> &'static str {
    tracing::info!(key = %principal.key_id, "a running turn is stopped by this key");
    if principal.user.is_some() {
        "the end user"
    } else if principal.is_platform() {
        "an operator"
    } else {
        "the app"
    }
}

/// Cancels the session's running turn and answers once its TURN_ERROR
/// `cancelled` (or its own ending, if it won the race) is committed: 200
/// with the session then; 202 if the turn's host has not confirmed within
/// `CANCEL_WAIT` (the turn ends when it does).
pub(super) async fn cancel(
    State(state): State<AppState>,
    principal: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<SessionView>), ApiError> {
    let record = principal.session(&state, &id).await?;
    if record.status != SessionStatus::Running {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "the session has no running turn to cancel (it is {})",
                record.status.as_str()
            ),
        ));
    }
    let by = canceller(&principal).to_string();
    match state.runtime.cancel(record.id, record.turn, by).await? {
        Some(now) => Ok((StatusCode::OK, Json(SessionView::from(&now)))),
        None => Ok((StatusCode::ACCEPTED, Json(SessionView::from(&record)))),
    }
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EndSession {
    /// Why the session ends (at most 1 KiB), journaled in SESSION_ENDED.
    #[serde(default)]
    reason: Option<String>,
}

/// Ends the session with SESSION_ENDED: a running turn is cancelled first,
/// a pending approval is dropped. 409 when it has already ended.
pub(super) async fn end(
    State(state): State<AppState>,
    principal: Caller,
    Path(id): Path<String>,
    OptionalJson(body): OptionalJson<EndSession>,
) -> Result<Json<SessionView>, ApiError> {
    if body
        .reason
        .as_ref()
        .is_some_and(|r| r.len() > MAX_REASON_BYTES)
    {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("`reason` is longer than {MAX_REASON_BYTES} bytes"),
        ));
    }
    let record = principal.session(&state, &id).await?;
    if record.status == SessionStatus::Running {
        let by = format!("{} ending the session", canceller(&principal));
        stop_turn(&state, &record, by).await?;
    }
    let record = state
        .writer
        .end_session(record.id, body.reason, principal.key_id.clone())
        .await?;
    Ok(Json(SessionView::from(&record)))
}

/// Deletes the session: its journal and records; its open streams end. A
/// running turn is cancelled first. 404 afterwards.
pub(super) async fn delete(
    State(state): State<AppState>,
    principal: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let record = principal.session(&state, &id).await?;
    if record.status == SessionStatus::Running {
        let by = format!("{} deleting the session", canceller(&principal));
        stop_turn(&state, &record, by).await?;
    }
    state.writer.delete_session(record.id, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Cancels the session's running turn and waits for its end; 409 if its
/// host does not confirm in time.
async fn stop_turn(state: &AppState, record: &SessionRecord, by: String) -> Result<(), ApiError> {
    match state.runtime.cancel(record.id, record.turn, by).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::new(
            ErrorCode::Conflict,
            "the running turn has not stopped yet (its host did not confirm the cancel in time): retry",
        )),
    }
}

/// `PATCH /sessions/{id}`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PatchSession {
    /// The session's own LLM budget, `{"tokens": N}` or `{"cost": X}`
    /// (required; `null`: the manifest's `[llm] budget_per_session` again).
    #[schema(value_type = Option<BudgetBody>, required = true)]
    budget: Option<crate::store::Budget>,
}

/// A budget as the OpenAPI document spells it: exactly one unit.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum BudgetBody {
    Tokens(TokensBudget),
    Cost(CostBudget),
}

/// `{"tokens": N}`: input plus output tokens.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct TokensBudget {
    #[schema(minimum = 1, maximum = 9007199254740991_u64)]
    tokens: u64,
}

/// `{"cost": X}`: money, in the unit of the aliases' `price`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(super) struct CostBudget {
    #[schema(exclusive_minimum = 0.0)]
    cost: f64,
}

/// Sets the session's LLM budget (platform keys only: an end user or an
/// app key would raise their own spend limit); a session `paused_budget`
/// whose refused call the new budget covers resumes with TURN_STARTED
/// `budget_raised`, which the returned session shows as `running`.
pub(super) async fn patch(
    State(state): State<AppState>,
    principal: Caller,
    Path(id): Path<String>,
    Json(mut body): Json<serde_json::Value>,
) -> Result<Json<SessionView>, ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidBody, message);
    if body.get("budget").is_none() {
        return Err(invalid(
            "send `budget`: {\"tokens\": N}, {\"cost\": X} or null".into(),
        ));
    }
    // `{"tokens": 296.0}` is an integer to the document (JSON Schema), as
    // every JSON body is read (`extract::Json`).
    super::extract::integral_floats(&mut body);
    let body: PatchSession =
        serde_json::from_value(body).map_err(|e| invalid(format!("the body: {e}")))?;
    if let Some(budget) = &body.budget {
        budget
            .check()
            .map_err(|why| invalid(format!("`budget`: {why}")))?;
    }
    let record = principal.session(&state, &id).await?;
    let record = (state.writer)
        .set_budget(record.id, body.budget, principal.by())
        .await?;
    Ok(Json(SessionView::from(&record)))
}
