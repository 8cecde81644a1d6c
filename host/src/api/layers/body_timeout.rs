//! The request body's read deadline (`--body-read-timeout-secs`): a body
//! that has not fully arrived that long after its head gets `408
//! request_timeout`, and the connection is closed. hyper bounds the time to
//! read a request's head (`serve.rs`) but not its body, so without this a
//! client trickling a body holds a connection and its buffers for ever.
//!
//! `POST /deployments`, whose body is a bundle of up to 128 MiB, gets
//! `UPLOAD_FACTOR` times the deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use crate::api::{ApiError, AppState, ErrorCode};

/// Seconds a request body may take unless the operator says otherwise.
pub(crate) const DEFAULT_SECS: u64 = 30;
/// How many times the deadline a bundle upload gets.
pub(crate) const UPLOAD_FACTOR: u32 = 20;

/// How long a body may take to arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout(pub Duration);

impl Default for BodyTimeout {
    fn default() -> Self {
        BodyTimeout(Duration::from_secs(DEFAULT_SECS))
    }
}

/// Whether the request has a body still to read (its head says so).
fn has_body(request: &Request) -> bool {
    let headers = request.headers();
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    (headers.get(header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
}

/// The middleware, outside every route: the body given to the handler
/// fails once the deadline passes, and the answer is then 408.
pub(crate) async fn limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !has_body(&request) {
        return next.run(request).await;
    }
    let mut timeout = state.limits.body_timeout.0;
    if request.uri().path() == "/deployments" {
        timeout = timeout.saturating_mul(UPLOAD_FACTOR);
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let expired = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let flag = expired.clone();
    let mut data = body.into_data_stream();
    let body = async_stream::stream! {
        loop {
            match tokio::time::timeout_at(deadline, data.next()).await {
                Ok(Some(chunk)) => yield chunk,
                Ok(None) => return,
                Err(_) => {
                    flag.store(true, Ordering::Relaxed);
                    yield Err(axum::Error::new("the request body did not arrive in time"));
                    return;
                }
            }
        }
    };
    let response = next
        .run(Request::from_parts(parts, Body::from_stream(body)))
        .await;
    if !expired.load(Ordering::Relaxed) {
        return response;
    }
    let mut response = ApiError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body did not arrive within {} s (--body-read-timeout-secs)",
            timeout.as_secs()
        ),
    )
    .into_response();
    // The rest of the body is never read: the connection cannot be reused.
    (response.headers_mut()).insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
