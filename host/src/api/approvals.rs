//! `GET /approvals` (pending decisions across apps) and
//! `POST /sessions/{id}/approval` (decide, exactly once).

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{Json, Path, Query, session_id};
use super::{ApiError, AppState, views};
use crate::keys::Principal;
use crate::store::{Decision, TurnReason};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    approved: bool,
    #[serde(default)]
    approver: Option<String>,
}

/// Longest `approver` accepted.
const MAX_APPROVER: usize = 200;

pub async fn decide(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<DecideBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    state.refuse_if_shutting_down()?;
    let session = session_id(&id)?;
    let approver = match body.approver.map(|a| a.trim().to_string()) {
        None => principal.name.clone(),
        Some(a) if a.is_empty() || a.len() > MAX_APPROVER => {
            return Err(ApiError::unprocessable(
                "invalid_body",
                format!("`approver` must be 1 to {MAX_APPROVER} bytes of text"),
            ));
        }
        Some(a) => a,
    };
    let decision = Decision {
        approved: body.approved,
        approver: approver.clone(),
        key_id: principal.key_id.clone(),
    };
    let ticket = state
        .writer
        .decide(session, decision, state.boot_id)
        .await?;
    let turn = ticket.turn;
    let tool_call_id = match &ticket.reason {
        TurnReason::ApprovalDecision { pending, .. } => Some(pending.call.tool_call_id.clone()),
        TurnReason::Input => None,
    };
    state.runtime.schedule(ticket);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "session_id": session,
            "tool_call_id": tool_call_id,
            "approved": body.approved,
            "approver": approver,
            "turn": turn,
            "status": "running",
        })),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    app: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;

pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let before = match query.cursor.as_deref() {
        None => None,
        Some(c) => Some(Uuid::parse_str(c).map_err(|_| {
            ApiError::bad_request(
                "invalid_query",
                format!("`cursor` = `{c}` is not a cursor from this API"),
            )
        })?),
    };
    let limit = query.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let app = query.app;
    let items = state
        .store
        .read(move |s| {
            let app_id = match app {
                None => None,
                Some(app) => match s.app(&app)? {
                    Some(app) => Some(app.id),
                    None => return Ok(Vec::new()),
                },
            };
            s.pending_approvals(app_id, before, limit + 1)
        })
        .await?;
    let more = items.len() > limit;
    let next_cursor = more.then(|| items[limit - 1].session.id.to_string());
    let mut out = Vec::with_capacity(items.len().min(limit));
    for item in items.iter().take(limit) {
        let event: Value = serde_json::from_str(&item.event.json).map_err(ApiError::internal)?;
        out.push(json!({"session": views::session(&item.session), "event": event}));
    }
    Ok(Json(json!({"items": out, "next_cursor": next_cursor})))
}
