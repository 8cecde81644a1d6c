//! `POST /sessions`, `GET /sessions`, `GET /sessions/{id}`, `POST /sessions/{id}/input`
//! (the two POSTs take an `Idempotency-Key`, `idempotency.rs`).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::caller::Caller;
use super::extract::{Json, Path, Query, session_id};
use super::idempotency::{Fingerprint, idempotency, key_of};
use super::paging::{Page, app_filter};
use super::turns::{self, Answer, Target};
use super::views::{self, CreatedSession, SessionView, StreamToken, TurnAccepted};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::Scope;
use crate::store::{OnBusy, SessionFilter, SessionStatus};

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
    caller: Caller,
    headers: HeaderMap,
    Json(body): Json<CreateSession>,
) -> Result<(StatusCode, Json<CreatedSession>), ApiError> {
    state.refuse_if_shutting_down()?;
    let key = key_of(&headers)?;
    let key = idempotency(key, &caller, Fingerprint::json("POST", "/sessions", &body)?)?;
    let target = Target::New {
        app: body.app,
        route: body.route,
    };
    let started = turns::start(&state, &caller, target, body.input, key).await?;
    let Answer::Created(record) = started.answer else {
        return Err(ApiError::internal("a new session answered something else"));
    };
    let record = *record;
    // A retry gets the first session as it was created, and a fresh token
    // (credentials are never stored).
    let (stream_token, stream_token_expires_at) = caller.stream_token(&state, record.id).await?;
    let out = CreatedSession {
        session: SessionView::from(&record),
        stream_token,
        stream_token_expires_at,
    };
    Ok((StatusCode::CREATED, Json(out)))
}

pub(super) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let record = caller.session(&state, &id).await?;
    Ok(Json(SessionView::from(&record)))
}

/// Mints a stream token for the session's event stream (`?token=`), for
/// browsers whose EventSource cannot send an Authorization header.
pub(super) async fn stream_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<StreamToken>), ApiError> {
    let record = caller.session(&state, &id).await?;
    let (stream_token, stream_token_expires_at) = caller.stream_token(&state, record.id).await?;
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
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> Result<Json<views::SessionPage>, ApiError> {
    // A platform key lists every session (of one end user with `user`);
    // an end user their own; a bare invocation key, whose holders are all
    // the app's end users, none.
    let (app, end_user) = match (caller.scope, caller.user_id()) {
        (Scope::Platform, _) => (query.app, query.user),
        (Scope::App(own), Some(user)) => {
            if query.user.as_deref().is_some_and(|u| u != user) {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "an end user lists only their own sessions",
                ));
            }
            if let Some(named) = &query.app {
                let own_slug = caller.own_slug(&state).await?;
                caller.refuse_other_app(named, own_slug.as_deref())?;
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
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<PostInput>,
) -> Result<(StatusCode, Json<TurnAccepted>), ApiError> {
    state.refuse_if_shutting_down()?;
    let key = key_of(&headers)?;
    let id = if caller.is_platform() {
        session_id(&id)?
    } else {
        caller.session(&state, &id).await?.id
    };
    let path = format!("/sessions/{id}/input");
    let key = idempotency(key, &caller, Fingerprint::json("POST", &path, &body)?)?;
    let on_busy = match body.on_busy {
        None | Some(OnBusyMode::Reject) => OnBusy::Reject,
        Some(OnBusyMode::Enqueue) => OnBusy::Enqueue,
        Some(OnBusyMode::Interrupt) => OnBusy::Interrupt,
    };
    let target = Target::Session { id, on_busy };
    let started = turns::start(&state, &caller, target, body.input, key).await?;
    let Answer::Input(answer) = started.answer else {
        return Err(ApiError::internal("an input answered something else"));
    };
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
