//! `GET /decision-links?t=…` and `POST /decision-links?t=…`: the signed
//! links of `approval.requested` (`webhooks::links`). GET shows a small
//! confirmation page and decides nothing (so a chat app's link preview
//! decides nothing); POST decides that one call, attributed to the endpoint
//! (approver `webhook:<id>`), through the writer's decision command, which
//! starts the resumed turn. The token travels in the query string, which
//! the request log leaves out.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::Query;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::store::{By, Decision, SessionStatus, StoreError, now_rfc3339};
use crate::webhooks::links::{self, Claim};

#[derive(Deserialize)]
pub(super) struct LinkQuery {
    t: Option<String>,
}

/// The link's claim, if its signature holds and its endpoint still gives links.
async fn claim(state: &AppState, query: &LinkQuery) -> Result<Claim, ApiError> {
    let unknown = || ApiError::new(ErrorCode::NotFound, "no such decision link");
    let token = query.t.as_deref().ok_or_else(unknown)?;
    let claim = links::verify(&state.links_key, token).ok_or_else(unknown)?;
    let webhooks = state.store.read(|s| s.webhooks()).await?;
    webhooks
        .iter()
        .find(|w| w.id == claim.webhook && w.decision_links && w.disabled.is_none())
        .ok_or_else(unknown)?;
    Ok(claim)
}

fn expired(claim: &Claim) -> bool {
    // RFC 3339 in one format: compared as text, as the deadline sweep does.
    claim
        .expires_at
        .as_deref()
        .is_some_and(|at| at <= now_rfc3339().as_str())
}

fn gone() -> ApiError {
    ApiError::new(
        ErrorCode::Expired,
        "the approval's deadline passed: this link decides nothing",
    )
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

pub(super) async fn show(
    State(state): State<AppState>,
    Query(query): Query<LinkQuery>,
) -> Result<Response, ApiError> {
    let claim = claim(&state, &query).await?;
    if expired(&claim) {
        return Err(gone());
    }
    let session = state
        .store
        .read(move |s| s.session(claim.session))
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no such decision link"))?;
    let pending = (session.pending_approval.as_ref())
        .filter(|p| session.status == SessionStatus::AwaitingApproval && p.event_seq == claim.seq)
        .ok_or_else(decided)?;
    let verb = if claim.approve { "Approve" } else { "Deny" };
    let arguments = serde_json::to_string_pretty(&pending.call.arguments).unwrap_or_default();
    let token = escape(query.t.as_deref().unwrap_or_default());
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{verb} `{tool}`?</title></head><body>\
         <h1>{verb} the call of <code>{tool}</code>?</h1>\
         <p>App <code>{app}</code>, session <code>{session}</code>.</p>\
         <pre>{arguments}</pre>\
         <form method=\"post\" action=\"?t={token}\"><button type=\"submit\">{verb}</button></form>\
         </body></html>",
        tool = escape(&pending.call.name),
        app = escape(&session.app_slug),
        session = session.id,
        arguments = escape(&arguments),
    );
    Ok(html(StatusCode::OK, page))
}

fn decided() -> ApiError {
    StoreError::Conflict(
        "this call is no longer pending: it was already decided, or its session ended".into(),
    )
    .into()
}

pub(super) async fn decide(
    State(state): State<AppState>,
    Query(query): Query<LinkQuery>,
) -> Result<Response, ApiError> {
    state.refuse_if_shutting_down()?;
    let claim = claim(&state, &query).await?;
    if expired(&claim) {
        return Err(gone());
    }
    let approver = format!("webhook:{}", claim.webhook);
    let decision = Decision {
        approved: claim.approve,
        approver: approver.clone(),
        by: By::Platform { key_id: approver },
        details: Default::default(),
        checked_seq: None,
    };
    match (state.writer)
        .decide_at(claim.session, claim.seq, decision)
        .await
    {
        Ok(_) => {}
        Err(StoreError::NotFound { .. }) => {
            return Err(ApiError::new(ErrorCode::NotFound, "no such decision link"));
        }
        Err(err) => return Err(err.into()),
    }
    let verb = if claim.approve { "approved" } else { "denied" };
    Ok(html(
        StatusCode::OK,
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>Done</title></head>\
             <body><h1>The call was {verb}.</h1></body></html>"
        ),
    ))
}
