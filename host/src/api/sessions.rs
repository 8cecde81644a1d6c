//! `POST /sessions`, `GET /sessions`, `GET /sessions/{id}`, `POST /sessions/{id}/input`
//! (the two POSTs take an `Idempotency-Key`, `idempotency.rs`).

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::end_users;
use super::extract::{Json, Path, Query, session_id};
use super::idempotency::{Fingerprint, idempotency, key_of};
use super::paging::{Page, app_filter};
use super::views::{self, CreatedSession, SessionView, StreamToken, TurnAccepted};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::{Principal, Scope};
use crate::store::{InputOutcome, OnBusy, SessionFilter, SessionRecord, SessionStatus};

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateSession {
    app: String,
    route: String,
    #[serde(default)]
    input: Value,
}

pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    Json(body): Json<CreateSession>,
) -> Result<(StatusCode, Json<CreatedSession>), ApiError> {
    state.refuse_if_shutting_down()?;
    let key = key_of(&headers)?;
    let key = idempotency(
        key,
        &principal,
        Fingerprint::json("POST", "/sessions", &body)?,
    )?;
    let mut owner = None;
    let public = !principal.is_platform();
    if public {
        // An end user names only their own app (the same answer whether
        // another app exists or not).
        let own_slug = end_users::own_slug(&state, &principal).await?;
        end_users::refuse_other_app(&principal, &body.app, own_slug.as_deref())?;
        // An invocation key reaches only its own app; others do not exist for it.
        let key = body.app.clone();
        let app = state.store.read(move |s| s.app(&key)).await?;
        let Some(app) = app.filter(|app| principal.may_use_app(app.id)) else {
            return Err(ApiError::new(
                ErrorCode::AppNotFound,
                format!("app `{}` not found", body.app),
            ));
        };
        let policy = end_users::refuse_bare_key_if_required(&state, &principal, app.id).await?;
        owner = end_users::owner(&principal, policy.as_ref());
    }
    // The writer starts the turn it commits (`store::start`).
    let done = (state.writer)
        .create_session_once_as(body.app, body.route, body.input, owner, public, key)
        .await?;
    // A retry gets the first session as it was created, and a fresh token
    // (credentials are never stored).
    let record = done.answer;
    let (stream_token, stream_token_expires_at) =
        end_users::mint_stream_token(&state, record.id, &principal).await?;
    let out = CreatedSession {
        session: SessionView::from(&record),
        stream_token,
        stream_token_expires_at,
    };
    Ok((StatusCode::CREATED, Json(out)))
}

/// The session, if this caller may reach it; 404 otherwise (an invocation
/// key never learns that another app's session exists).
pub(super) async fn visible_session(
    state: &AppState,
    principal: &Principal,
    raw_id: &str,
) -> Result<SessionRecord, ApiError> {
    let id = session_id(raw_id)?;
    let not_found = || {
        ApiError::new(
            ErrorCode::SessionNotFound,
            format!("session `{id}` not found"),
        )
    };
    let record = state
        .store
        .read(move |s| s.session(id))
        .await?
        .ok_or_else(not_found)?;
    if !principal.may_use_session(record.id, record.app_id, record.end_user.as_deref()) {
        return Err(not_found());
    }
    end_users::refuse_bare_key(state, principal, record.app_id).await?;
    Ok(record)
}

pub(super) async fn get(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let record = visible_session(&state, &principal, &id).await?;
    Ok(Json(SessionView::from(&record)))
}

/// Mints a stream token for the session's event stream (`?token=`), for
/// browsers whose EventSource cannot send an Authorization header.
pub(super) async fn stream_token(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<StreamToken>), ApiError> {
    let record = visible_session(&state, &principal, &id).await?;
    let (stream_token, stream_token_expires_at) =
        end_users::mint_stream_token(&state, record.id, &principal).await?;
    Ok((
        StatusCode::CREATED,
        Json(StreamToken {
            session_id: record.id,
            stream_token,
            stream_token_expires_at,
        }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    app: Option<String>,
    /// Only the sessions of this end user (platform keys).
    user: Option<String>,
    status: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

pub(super) async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<ListQuery>,
) -> Result<Json<views::SessionPage>, ApiError> {
    // A platform key lists every session (of one end user with `user`);
    // an end user their own; a bare invocation key, whose holders are all
    // the app's end users, none.
    let (app, end_user) = match (principal.scope, principal.user_id()) {
        (Scope::Platform, _) => (query.app, query.user),
        (Scope::App(own), Some(user)) => {
            if query.user.as_deref().is_some_and(|u| u != user) {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "an end user lists only their own sessions",
                ));
            }
            if let Some(named) = &query.app {
                let own_slug = end_users::own_slug(&state, &principal).await?;
                end_users::refuse_other_app(&principal, named, own_slug.as_deref())?;
            }
            (Some(own.to_string()), Some(user.to_string()))
        }
        _ => {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "listing sessions needs a platform key or an end-user token",
            ));
        }
    };
    let status = match query.status.as_deref() {
        None => None,
        Some(s) => Some(SessionStatus::parse(s).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidQuery,
                format!(
                    "unknown status `{s}`: use running, idle, awaiting_approval, errored or ended"
                ),
            )
        })?),
    };
    let page = Page::new(query.cursor.as_deref(), query.limit)?;
    let (before, limit) = (page.cursor, page.limit);
    let records = state
        .store
        .read(move |s| match app_filter(s, app)? {
            // An unknown app has no sessions.
            Some(None) => Ok(Vec::new()),
            filter => s.sessions(&SessionFilter {
                app_id: filter.flatten(),
                status,
                before,
                limit: limit + 1,
                end_user: end_user.clone(),
            }),
        })
        .await?;
    let (records, next_cursor) = page.finish(records, |record| record.id);
    let items = records.iter().map(SessionView::from).collect();
    Ok(Json(views::SessionPage { items, next_cursor }))
}

#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PostInput {
    #[serde(default)]
    input: Value,
    /// What the input does while a turn runs or an approval is pending
    /// (docs/api.md, "Input while a turn runs"); `reject` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on_busy: Option<OnBusyMode>,
}

/// `on_busy` of `POST /sessions/{id}/input`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum OnBusyMode {
    /// 409 (the default).
    Reject,
    /// 202, journaled as INPUT_QUEUED; runs as a turn of its own once the session is idle.
    Enqueue,
    /// 202: queued first, and the running turn is cancelled as by `/cancel`; 409 while an approval is pending.
    Interrupt,
}

pub(super) async fn input(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<PostInput>,
) -> Result<(StatusCode, Json<TurnAccepted>), ApiError> {
    state.refuse_if_shutting_down()?;
    let key = key_of(&headers)?;
    let id = if principal.is_platform() {
        session_id(&id)?
    } else {
        visible_session(&state, &principal, &id).await?.id
    };
    let path = format!("/sessions/{id}/input");
    let key = idempotency(key, &principal, Fingerprint::json("POST", &path, &body)?)?;
    let on_busy = match body.on_busy {
        None | Some(OnBusyMode::Reject) => OnBusy::Reject,
        Some(OnBusyMode::Enqueue) => OnBusy::Enqueue,
        Some(OnBusyMode::Interrupt) => OnBusy::Interrupt,
    };
    let public = !principal.is_platform();
    let done = match principal.user_id() {
        // The user's own input counts against their share of turns.
        Some(user) => {
            (state.writer)
                .user_input_once(id, body.input, on_busy, key, user.to_string())
                .await?
        }
        None => {
            (state.writer)
                .input_once_as(id, body.input, on_busy, public, key)
                .await?
        }
    };
    if let Some(InputOutcome::Queued(queued)) = &done.work
        && let Some(turn) = queued.interrupts
    {
        // Queued first; the cancelled turn's end starts it (not on a replay:
        // the first request cancelled).
        let by = format!(
            "{} interrupting it with a new input",
            super::controls::canceller(&principal)
        );
        if let Err(err) = state.runtime.cancel(id, turn, by).await {
            // The input is queued: it runs once the turn ends however it does.
            tracing::warn!(session = %id, turn, error = %err, "could not cancel the interrupted turn");
        }
    }
    let answer = done.answer;
    let (status, queued) = match answer.queued {
        Some(queued) => (
            queued.status,
            Some(views::QueuedView {
                input_id: queued.input_id,
                position: queued.position,
            }),
        ),
        None => (SessionStatus::Running, None),
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(TurnAccepted {
            session_id: answer.session_id,
            turn: answer.turn,
            status,
            queued,
        }),
    ))
}
