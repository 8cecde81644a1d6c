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
//! endpoint's secret, whichever comes first (410 after). A browser (an
//! `Accept` naming `text/html`) gets every answer, refusals included, as a
//! page of `decision_page`; other clients get refusals as JSON errors.

use std::net::SocketAddr;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use super::decision_page::{self, Closed, Decided, Pending};
use super::extract::Query;
use super::{ApiError, AppState, decision_details};
use crate::api::ErrorCode;
use crate::journal::payloads::{ToolApprovalDenied, ToolApprovalGranted, ToolApprovalRequired};
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

/// The answer with `SECURITY_HEADERS`.
fn secured(mut response: Response) -> Response {
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

/// The form a link's page posts: a deny's optional message.
#[derive(Deserialize, Default)]
struct LinkForm {
    message: Option<String>,
}

/// Why a request gets no decision: a closed link, or any other error.
enum Refusal {
    Closed(Closed),
    Api(ApiError),
}

impl<E: Into<ApiError>> From<E> for Refusal {
    fn from(err: E) -> Self {
        Refusal::Api(err.into())
    }
}

impl Refusal {
    /// The refusal as a browser's page or a client's JSON error.
    fn into_response(self, browser: bool) -> Response {
        let closed = match self {
            Refusal::Api(err) => return err.into_response(),
            Refusal::Closed(closed) => closed,
        };
        let (status, code, message) = match &closed {
            Closed::Invalid => (StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such decision link".to_string()),
            Closed::Revoked => (StatusCode::GONE, ErrorCode::Expired, "this link was revoked: its webhook endpoint's secret was rotated since it was sent; decide the call in the console or with POST /sessions/{id}/approval".into()),
            Closed::LinkExpired => (StatusCode::GONE, ErrorCode::Expired, "this link's lifetime (--decision-link-ttl) passed: it decides nothing; decide the call in the console or with POST /sessions/{id}/approval".into()),
            Closed::DeadlinePassed => (StatusCode::GONE, ErrorCode::Expired, "the approval's deadline passed: this link decides nothing".into()),
            Closed::Decided(d) => (StatusCode::CONFLICT, ErrorCode::Conflict, format!(
                "this call is no longer pending: it was already {} by {} at {}",
                if d.approved { "approved" } else { "denied" }, d.approver, d.at
            )),
            Closed::Gone => (StatusCode::CONFLICT, ErrorCode::Conflict, "this call is no longer pending: it was already decided, or its session ended".into()),
        };
        if browser {
            html(status, decision_page::closed(&closed))
        } else {
            ApiError::new(code, message).into_response()
        }
    }
}

/// Whether the request comes from a browser, which reads pages.
fn browser(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// The link's claim, if its signature holds and its endpoint still gives links.
async fn claim(state: &AppState, query: &LinkQuery) -> Result<Claim, Refusal> {
    let closed = |c| Refusal::Closed(c);
    let token = query.t.as_deref().ok_or(closed(Closed::Invalid))?;
    let claim = links::verify(&state.links_key, token).ok_or(closed(Closed::Invalid))?;
    let webhooks = state.store.read(|s| s.webhooks()).await?;
    let endpoint = webhooks
        .iter()
        .find(|w| w.id == claim.webhook && w.decision_links && w.disabled.is_none())
        .ok_or(closed(Closed::Invalid))?;
    if claim.generation != endpoint.link_generation {
        return Err(closed(Closed::Revoked));
    }
    if claim.until_ms <= unix_ms(std::time::SystemTime::now()) {
        return Err(closed(Closed::LinkExpired));
    }
    if expired(&claim) {
        return Err(closed(Closed::DeadlinePassed));
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

/// Why the call the link names is not pending: its decision (by anyone,
/// however it was made) if the journal has one after the request, else
/// `Gone` (its session ended or went on).
async fn settled(state: &AppState, session: Uuid, seq: u64) -> Result<Closed, Refusal> {
    // The decision is committed right after the request, with the resumed
    // turn's start; a few events are enough to find it.
    let events = state.store.read(move |s| s.events(session, seq, 8)).await?;
    let Some(Ok(Some(required))) = events.first().map(|e| e.payload::<ToolApprovalRequired>())
    else {
        return Ok(Closed::Gone);
    };
    for event in &events[1..] {
        let decided = if let Ok(Some(g)) = event.payload::<ToolApprovalGranted>() {
            (g.tool_call_id == required.tool_call_id).then_some((true, g.approver))
        } else if let Ok(Some(d)) = event.payload::<ToolApprovalDenied>() {
            (d.tool_call_id == required.tool_call_id).then_some((false, d.approver))
        } else {
            None
        };
        if let Some((approved, approver)) = decided {
            return Ok(Closed::Decided(Decided {
                approved,
                tool: required.name,
                approver,
                at: event.created_at().unwrap_or_default(),
            }));
        }
    }
    Ok(Closed::Gone)
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

pub(super) async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<LinkQuery>,
) -> Response {
    let browser = browser(&headers);
    secured(
        page(&state, &query)
            .await
            .unwrap_or_else(|refusal| refusal.into_response(browser)),
    )
}

async fn page(state: &AppState, query: &LinkQuery) -> Result<Response, Refusal> {
    let claim = claim(state, query).await?;
    let session = state
        .store
        .read(move |s| s.session(claim.session))
        .await?
        .ok_or(Refusal::Closed(Closed::Invalid))?;
    let Some(pending) = (session.pending_approval.as_ref())
        .filter(|p| session.status == SessionStatus::AwaitingApproval && p.event_seq == claim.seq)
    else {
        return Err(Refusal::Closed(
            settled(state, claim.session, claim.seq).await?,
        ));
    };
    let arguments = serde_json::to_string_pretty(&pending.call.arguments).unwrap_or_default();
    let link_until = crate::store::rfc3339_ms(claim.until_ms);
    let page = decision_page::pending(&Pending {
        approve: claim.approve,
        tool: &pending.call.name,
        reason: pending.reason.as_deref(),
        end_user: session.end_user.as_deref(),
        app: &session.app_slug,
        session: session.id.to_string(),
        arguments,
        link_until,
        deadline: pending.expires_at.as_deref(),
        token: query.t.as_deref().unwrap_or_default(),
    });
    Ok(html(StatusCode::OK, page))
}

pub(super) async fn decide(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Query(query): Query<LinkQuery>,
    body: Bytes,
) -> Response {
    let address = peer.map(|Extension(ConnectInfo(peer))| peer.ip());
    let browser = browser(&headers);
    secured(
        decision(&state, address, &query, &body)
            .await
            .unwrap_or_else(|refusal| refusal.into_response(browser)),
    )
}

async fn decision(
    state: &AppState,
    address: Option<std::net::IpAddr>,
    query: &LinkQuery,
    body: &[u8],
) -> Result<Response, Refusal> {
    state.refuse_if_shutting_down()?;
    let claim = claim(state, query).await?;
    // The page's form (a deny's message); a client may post nothing.
    let form: LinkForm = if body.is_empty() {
        LinkForm::default()
    } else {
        serde_urlencoded::from_bytes(body).map_err(|_| {
            ApiError::new(
                ErrorCode::InvalidBody,
                "the body must be a form (application/x-www-form-urlencoded) with at most a `message`",
            )
        })?
    };
    let message = form.message.filter(|m| !m.trim().is_empty());
    if claim.approve && message.is_some() {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            "a `message` comes only with a deny link",
        )
        .into());
    }
    let mut details = decision_details::details(claim.approve, None, message, None)?;
    let approver = format!("webhook:{}", claim.webhook);
    let address_hash = address.map(|ip| links::address_hash(&state.links_key, ip));
    // The address itself is for the operator's log only.
    tracing::info!(
        webhook = %claim.webhook, session = %claim.session, seq = claim.seq,
        approve = claim.approve, address = ?address, address_hash = ?address_hash,
        "a decision link is used"
    );
    details.address_hash = address_hash;
    let decision = Decision {
        approved: claim.approve,
        approver: approver.clone(),
        by: By::Platform { key_id: approver },
        details,
        checked_seq: None,
    };
    match (state.writer)
        .decide_at(claim.session, claim.seq, decision)
        .await
    {
        Ok(_) => {}
        Err(StoreError::NotFound { .. }) => return Err(Refusal::Closed(Closed::Invalid)),
        Err(StoreError::Conflict(_)) => {
            return Err(Refusal::Closed(
                settled(state, claim.session, claim.seq).await?,
            ));
        }
        Err(err) => return Err(err.into()),
    }
    let tool = state
        .store
        .read(move |s| s.events(claim.session, claim.seq, 1))
        .await?
        .first()
        .and_then(|e| e.payload::<ToolApprovalRequired>().ok().flatten())
        .map(|r| r.name)
        .unwrap_or_default();
    Ok(html(
        StatusCode::OK,
        decision_page::done(claim.approve, &tool, &now_rfc3339()),
    ))
}
