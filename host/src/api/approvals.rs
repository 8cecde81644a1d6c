//! `GET /approvals` (pending decisions across apps) and
//! `POST /sessions/{id}/approval` (decide, exactly once; takes an
//! `Idempotency-Key`).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::caller::Caller;
use super::decision_details;
use super::extract::{Json, Path, Query, session_id};
use super::idempotency::{Fingerprint, idempotency, key_of};
use super::paging::{Page, app_filter};
use super::views::{self, ApprovalItemView, DecisionAccepted, SessionView};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::store::{ApprovalItem, Decision, SessionStatus};

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DecideBody {
    approved: bool,
    /// Who decides (1 to 200 bytes); by default the deciding key's name.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    approver: Option<String>,
    /// Approve with these arguments instead of the agent's (only with
    /// `approved: true`; checked against the tool's JSON Schema, 422
    /// `invalid_arguments` otherwise). The tool runs with them.
    #[serde(default)]
    arguments: Option<Value>,
    /// A note the agent receives with the decision (1 to 4096 bytes), for
    /// example why it was denied.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 4096, pattern = "\\S")]
    message: Option<String>,
    /// Answer in place of the tool (only with `approved: true`, not with
    /// `arguments`): the tool does not run and the agent receives this as
    /// its result.
    #[serde(default)]
    result: Option<Value>,
}

/// Longest `approver` accepted.
const MAX_APPROVER: usize = 200;

pub(super) async fn decide(
    State(state): State<AppState>,
    principal: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<DecideBody>,
) -> Result<(StatusCode, Json<DecisionAccepted>), ApiError> {
    state.refuse_if_shutting_down()?;
    let key = key_of(&headers)?;
    let session = session_id(&id)?;
    let path = format!("/sessions/{session}/approval");
    let key = idempotency(key, &principal, Fingerprint::json("POST", &path, &body)?)?;
    // An end user decides under their own id, and only their own session's
    // calls (404 for anyone else's, as if it did not exist).
    let end_user = principal.user_id().map(str::to_string);
    if end_user.is_some() {
        principal.session(&state, &id).await?;
        // The end user confirms or refuses what the agent proposed; only an
        // operator may rewrite the call or answer in place of the tool.
        if body.arguments.is_some() || body.result.is_some() {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "an end user approves or denies the call as the agent proposed it (with a `message` if they like): `arguments` and `result` need a platform key",
            ));
        }
    }
    let approver = match body.approver.map(|a| a.trim().to_string()) {
        _ if end_user.is_some() => end_user.clone().unwrap_or_default(),
        None => principal.name.clone(),
        Some(a) if a.is_empty() || a.len() > MAX_APPROVER => {
            return Err(ApiError::new(
                ErrorCode::InvalidBody,
                format!("`approver` must be 1 to {MAX_APPROVER} bytes of text"),
            ));
        }
        Some(a) => a,
    };
    let details =
        decision_details::details(body.approved, body.arguments, body.message, body.result)?;
    let checked_seq = decision_details::check_arguments(&state, session, &details).await?;
    let decision = Decision {
        approved: body.approved,
        approver,
        by: principal.by(),
        details,
        checked_seq,
    };
    let done = (state.writer).decide(session, decision, key).await?;
    let answer = done.answer;
    Ok((
        StatusCode::ACCEPTED,
        Json(DecisionAccepted {
            session_id: answer.session_id,
            tool_call_id: answer.tool_call_id,
            approved: answer.approved,
            approver: answer.approver,
            turn: answer.turn,
            status: SessionStatus::Running,
        }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    app: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

pub(super) async fn list(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<views::ApprovalPage>, ApiError> {
    let page = Page::new(query.cursor.as_deref(), query.limit)?;
    let (after, limit, app) = (page.cursor, page.limit, query.app);
    let items = state
        .store
        .read(move |s| match app_filter(s, app)? {
            Some(None) => Ok(Vec::new()),
            filter => s.pending_approvals(filter.flatten(), after, limit + 1),
        })
        .await?;
    let (items, next_cursor) = page.finish(items, |item| item.event.id);
    let items = items.iter().map(item_view);
    Ok(Json(views::ApprovalPage {
        items: items.collect::<Result<_, _>>()?,
        next_cursor,
    }))
}

/// A pending approval as `GET /approvals` shows it.
pub(super) fn item_view(item: &ApprovalItem) -> Result<ApprovalItemView, ApiError> {
    Ok(ApprovalItemView {
        session: SessionView::from(&item.session),
        event: serde_json::from_str(&item.event.json).map_err(ApiError::internal)?,
    })
}
