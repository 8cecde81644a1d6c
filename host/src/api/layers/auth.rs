//! Authentication of every endpoint but the health checks, by the access its
//! row in the endpoint table names.
//!
//! Missing, malformed, unknown and revoked keys all get the same 401; an
//! end-user token that does not verify gets 401 with its reason
//! (`end_users`); a valid invocation key or end-user token on a platform
//! endpoint gets 403. App and session scope
//! (an invocation key only reaches its app's sessions, as 404 otherwise) is
//! checked by the handlers, which know the session.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{Access, ApiError, AppState, ErrorCode};
use crate::end_users::{EndUserAuthError, EndUsers, Refusal};
use crate::keys::{END_USER_KEY_PREFIX, Principal};
use crate::store::now_rfc3339;
use crate::tokens::StreamTokens;

pub(crate) async fn require_key(
    State((state, access)): State<(AppState, Access)>,
    mut request: Request,
    next: Next,
) -> Response {
    // The client: the peer, or behind a trusted proxy the address it names.
    let peer = (request.extensions().get::<ConnectInfo<SocketAddr>>())
        .map(|info| state.trusted_proxies.client(info.0.ip(), request.headers()));
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    // A valid API key is never refused by the throttle: an address over its
    // failures still gets in with a key this host knows (a cheap in-memory
    // check; only what would need more is refused).
    let mut known = None;
    if let Some(wait) = peer.and_then(|ip| state.auth_throttle.blocked(ip)) {
        known = bearer.and_then(|key| state.keys.verify(key));
        if known.is_none() {
            return throttled(state.auth_throttle.per_minute(), wait);
        }
    }
    let failed = || {
        if let Some(ip) = peer {
            state.auth_throttle.failed(ip);
        }
    };
    // Set when an API key (not a token) names the principal.
    let mut by_key = false;
    let principal = match bearer {
        // A key minted on another host a moment ago is looked up in the
        // store before it is refused (keys::lookup).
        Some(key) => match match known {
            Some(principal) => Some(principal),
            None => state.keys.verify_fresh(key, &state.store).await,
        } {
            Some(principal) => {
                by_key = true;
                Some(principal)
            }
            // An end user's token: refused with the reason (it names no key).
            None if EndUsers::claims_token(key) => {
                match state.end_users.authenticate(key, &state.store).await {
                    Ok(principal) => Some(principal),
                    Err(Refusal::Token(err)) => {
                        if could_be_a_guess(&err) {
                            failed();
                        }
                        return end_user_refused(&err);
                    }
                    Err(Refusal::Store(err)) => return ApiError::from(err).into_response(),
                }
            }
            None => None,
        },
        // A browser's EventSource cannot send headers: the event stream
        // also takes a session-scoped stream token in the query.
        None if access == Access::SessionStream => {
            match stream_token(&state, query_token(&request)).await {
                Ok(principal) => principal,
                Err(err) => return ApiError::from(err).into_response(),
            }
        }
        None => None,
    };
    let Some(mut principal) = principal else {
        failed();
        return unauthorized();
    };
    principal.source = peer;
    if access == Access::Platform && !principal.is_platform() {
        return ApiError::new(ErrorCode::Forbidden, "this endpoint needs a platform key")
            .into_response();
    }
    if access == Access::EndUser && principal.is_bare_invocation() {
        return ApiError::new(
            ErrorCode::Forbidden,
            "this endpoint needs a platform key or an end-user token",
        )
        .into_response();
    }
    // Only a request the key may make counts as its use.
    if by_key && state.keys.touch_due(&principal.key_id) {
        record_use(&state, &principal);
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// The `token=` of the request's query.
fn query_token(request: &Request) -> Option<String> {
    let query = request.uri().query()?;
    let token = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))?;
    Some(token.to_string())
}

/// The principal of a stream token in the query; an end user's is bound to
/// their revocation, read first (`end_users::revocation`).
async fn stream_token(
    state: &AppState,
    token: Option<String>,
) -> Result<Option<Principal>, crate::store::StoreError> {
    let Some(token) = token.as_deref() else {
        return Ok(None);
    };
    let revoked = match StreamTokens::key_of(token) {
        Some(key) if key.starts_with(END_USER_KEY_PREFIX) => {
            (state.end_users.revocations())
                .not_before(key, &state.store)
                .await?
        }
        _ => None,
    };
    Ok(state.tokens.verify(token, &state.keys, revoked))
}

/// Writes the key's last-used time in the background.
fn record_use(state: &AppState, principal: &Principal) {
    let writer = state.writer.clone();
    let id = principal.key_id.clone();
    tokio::spawn(async move {
        if let Err(err) = writer.touch_api_key(id, now_rfc3339()).await {
            tracing::warn!(error = %err, "cannot record a key's last use");
        }
    });
}

/// Whether a token's refusal counts against its address: not the refusals
/// of a genuine token (its signature held: expired, not yet valid, revoked),
/// which a client retrying with a stale token makes without guessing
/// anything, nor an identity provider that cannot be reached.
fn could_be_a_guess(err: &EndUserAuthError) -> bool {
    !matches!(
        err,
        EndUserAuthError::TokenExpired
            | EndUserAuthError::TokenNotYetValid
            | EndUserAuthError::TokenRevoked(_)
            | EndUserAuthError::JwksUnavailable(_)
    )
}

fn end_user_refused(err: &EndUserAuthError) -> Response {
    if let EndUserAuthError::JwksUnavailable(detail) = err {
        // The identity provider's fault, not the client's: its detail
        // (addresses, errors) is logged, not sent.
        tracing::warn!(%detail, "an app's JWKS is unavailable");
        return ApiError::new(
            ErrorCode::JwksUnavailable,
            "the app's identity provider cannot be reached to check the token; retry shortly",
        )
        .into_response();
    }
    let mut response = ApiError::new(ErrorCode::from(err), err.to_string()).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer error=\"invalid_token\""),
    );
    response
}

/// The answer to an address over its failed authentications.
fn throttled(per_minute: u32, wait: std::time::Duration) -> Response {
    let seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
    let mut response = ApiError::new(
        ErrorCode::TooManyAuthFailures,
        format!(
            "this address failed authentication more than {per_minute} times this minute (--auth-failures-per-minute): retry after {seconds} s"
        ),
    )
    .into_response();
    (response.headers_mut()).insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

fn unauthorized() -> Response {
    let mut response = ApiError::new(
        ErrorCode::Unauthorized,
        "missing or invalid API key: send `Authorization: Bearer <key>`",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is
/// case-insensitive (RFC 9110, 11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}
