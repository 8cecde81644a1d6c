//! The bound on the turn queue (`--max-queued-turns`): while that many
//! turns wait on this host for a slot, a request that would start one more
//! gets `503 overloaded` with `Retry-After`, before anything is committed.
//! A waiting turn holds no input (`runtime::turn::parked`): the bound is on the
//! count of waiting tasks.
//!
//! Checked before the request's work, so requests racing the last place
//! may all get in: the queue can pass the bound by the requests in flight
//! at that moment, never by more.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState, Endpoint};
use crate::api::ErrorCode;

/// Turns that may wait for a slot unless the operator says otherwise.
pub(crate) const DEFAULT_MAX_QUEUED: usize = 512;

/// Whether an endpoint may start a turn.
pub(crate) fn applies(endpoint: &Endpoint) -> bool {
    endpoint.method == "POST"
        && (endpoint.path == "/sessions"
            || endpoint.path == "/sessions/{id}/input"
            || endpoint.path == "/sessions/{id}/approval"
            || endpoint.path == "/decision-links"
            || endpoint.path.starts_with("/ag-ui/"))
}

/// The middleware, after authentication and the rate limit.
pub(crate) async fn refuse(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match overloaded(&state) {
        Some(refused) => refused,
        None => next.run(request).await,
    }
}

/// The refusal of one more turn while the queue is at its bound (also
/// for MCP's `tools/call`, whose endpoint answers other methods too).
pub(crate) fn overloaded(state: &AppState) -> Option<Response> {
    let max = state.limits.max_queued_turns;
    let waiting = state.runtime.turns_waiting();
    if max == 0 || waiting < max {
        return None;
    }
    crate::metrics::get().quota_refusal("queued_turns");
    let mut response = ApiError::new(
        ErrorCode::Overloaded,
        format!(
            "{waiting} turns are waiting for a slot on this server, its bound (--max-queued-turns {max}): retry shortly"
        ),
    )
    .into_response();
    (response.headers_mut()).insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    Some(response)
}
