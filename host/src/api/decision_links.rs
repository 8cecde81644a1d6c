//! `GET /decision-links?t=…` and `POST /decision-links?t=…`: the signed
//! links of `approval.requested` (`webhooks::links`). GET shows a small
//! confirmation page and decides nothing (so a chat app's link preview
//! decides nothing); POST decides that one call, attributed to the endpoint
//! (approver `webhook:<id>`), through the writer's decision command, which
//! starts the resumed turn, with a keyed hash of the deciding request's
//! address (`address_hash`; the address itself is logged). The token
//! travels in the query string, which the request log leaves out. Every
//! answer carries the headers of `SECURITY_HEADERS` (no framing, no
//! referrer, no script). A link decides until its own end
//! (`--decision-link-ttl`), the approval's deadline or a rotation of its
//! endpoint's secret, whichever comes first (410 after).

use std::net::SocketAddr;

use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::Query;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::store::{By, Decision, SessionStatus, StoreError, now_rfc3339, unix_ms};
use crate::webhooks::links::{self, Claim};

/// Sent with every answer of these endpoints: the page runs no script,
/// loads nothing, posts only to itself, is never framed and sends no
/// `Referer` (which would carry the token) to anything it links.
const SECURITY_HEADERS: [(&str, &str); 3] = [
    (
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
];

/// The answer, or the refusal, with `SECURITY_HEADERS`.
fn secured(result: Result<Response, ApiError>) -> Response {
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    for (name, value) in SECURITY_HEADERS {
        (response.headers_mut()).insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}

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
    let endpoint = webhooks
        .iter()
        .find(|w| w.id == claim.webhook && w.decision_links && w.disabled.is_none())
        .ok_or_else(unknown)?;
    if claim.generation != endpoint.link_generation {
        return Err(ApiError::new(
            ErrorCode::Expired,
            "this link was revoked: its webhook endpoint's secret was rotated since it was sent; decide the call in the console or with POST /sessions/{id}/approval",
        ));
    }
    if claim.until_ms <= unix_ms(std::time::SystemTime::now()) {
        return Err(ApiError::new(
            ErrorCode::Expired,
            "this link's lifetime (--decision-link-ttl) passed: it decides nothing; decide the call in the console or with POST /sessions/{id}/approval",
        ));
    }
    if expired(&claim) {
        return Err(ApiError::new(
            ErrorCode::Expired,
            "the approval's deadline passed: this link decides nothing",
        ));
    }
    Ok(claim)
}

fn expired(claim: &Claim) -> bool {
    // RFC 3339 in one format: compared as text, as the deadline sweep does.
    claim
        .expires_at
        .as_deref()
        .is_some_and(|at| at <= now_rfc3339().as_str())
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
) -> Response {
    secured(page(&state, &query).await)
}

async fn page(state: &AppState, query: &LinkQuery) -> Result<Response, ApiError> {
    let claim = claim(state, query).await?;
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
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Query(query): Query<LinkQuery>,
) -> Response {
    let address = peer.map(|Extension(ConnectInfo(peer))| peer.ip());
    secured(decision(&state, address, &query).await)
}

async fn decision(
    state: &AppState,
    address: Option<std::net::IpAddr>,
    query: &LinkQuery,
) -> Result<Response, ApiError> {
    state.refuse_if_shutting_down()?;
    let claim = claim(state, query).await?;
    let approver = format!("webhook:{}", claim.webhook);
    let address_hash = address.map(|ip| links::address_hash(&state.links_key, ip));
    // The address itself is for the operator's log only.
    tracing::info!(
        webhook = %claim.webhook, session = %claim.session, seq = claim.seq,
        approve = claim.approve, address = ?address, address_hash = ?address_hash,
        "a decision link is used"
    );
    let decision = Decision {
        approved: claim.approve,
        approver: approver.clone(),
        by: By::Platform { key_id: approver },
        details: crate::store::DecisionDetails {
            address_hash,
            ..Default::default()
        },
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
