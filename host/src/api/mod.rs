//! The HTTP API (axum): the router built from the endpoint table
//! (`table.rs`), auth, errors, logging; the typed bodies (`views.rs`) and
//! the OpenAPI document made from both (`openapi.rs`); the AG-UI binding
//! (`agui/`).
//!
//! Only this module knows axum. Handlers translate HTTP to calls on the
//! store, the writer, the runtime and the builder, and back.

mod agui;
mod app_schedules;
mod approval_feed;
mod approvals;
mod apps;
mod auth;
pub(crate) mod auth_throttle;
pub(crate) mod body_timeout;
mod caller;
mod console;
mod controls;
mod decision_details;
mod decision_links;
mod deployments;
mod end_user_schedules;
mod end_users;
mod error;
mod error_code;
pub(crate) mod events;
mod extract;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod guest_journal_tests;
pub(crate) mod health;
mod idempotency;
mod keys;
pub(crate) mod limits;
mod mcp;
mod openapi;
pub(crate) mod overload;
mod paging;
pub(crate) mod rate_limit;
mod schedules;
mod secrets;
mod serve;
mod sessions;
pub(crate) mod stream_caps;
mod table;
mod turns;
pub(crate) mod views;
mod webhook_views;
mod webhooks;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio::sync::watch;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub(crate) use error::ApiError;
pub(crate) use error_code::ErrorCode;
pub(crate) use limits::ApiLimits;
pub use table::endpoints;
#[cfg(test)]
pub(crate) use table::openapi_document;
use table::table;

use crate::build::Builder;
use crate::end_users::EndUsers;
use crate::keys::Keys;
use crate::runtime::Runtime;
use crate::secrets::Vault;
use crate::store::{Db, WriterHandle};
use crate::tokens::StreamTokens;

/// Largest request body of the JSON endpoints.
pub(crate) const JSON_BODY_LIMIT: usize = 1 << 20;
/// Largest `POST /deployments` body (the bundle and the manifest).
pub(crate) const BUNDLE_BODY_LIMIT: usize = 128 << 20;

/// What every handler can reach.
pub(crate) struct Services {
    pub store: Db,
    pub writer: WriterHandle,
    pub runtime: Arc<Runtime>,
    pub builder: Builder,
    pub keys: Keys,
    pub vault: Arc<Vault>,
    pub tokens: StreamTokens,
    /// End-user tokens (`end_users`).
    pub end_users: EndUsers,
    /// Becomes `true` when the server shuts down: open streams end.
    pub shutdown: watch::Receiver<bool>,
    /// Origins allowed to call the API from a browser.
    pub cors_origins: Vec<String>,
    /// The per-key rate limit's buckets.
    pub rate_limit: rate_limit::KeyLimiter,
    /// The event streams open per key and per end user, and their caps.
    pub streams: stream_caps::StreamSlots,
    /// How long a body may take, how large the approvals snapshot is.
    pub limits: ApiLimits,
    /// Failed authentications per source address.
    pub auth_throttle: auth_throttle::AuthThrottle,
    /// `/readyz`'s cached probe of the store.
    pub ready: health::ReadyProbe,
    /// The webhook settings (URL checks).
    pub webhooks: crate::webhooks::WebhookOptions,
    /// Signs and checks webhook decision links.
    pub links_key: [u8; 32],
}

pub(crate) type AppState = Arc<Services>;

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No key (health checks).
    Public,
    /// A platform key.
    Platform,
    /// A platform key, an invocation key of the session's app, or an end
    /// user of that app (their own sessions).
    Session,
    /// A platform key, or an end-user token (what is their own): not a bare
    /// invocation key, whose holders are all of an app's end users.
    EndUser,
    /// As `Session`, or a stream token of the session (`?token=`): the event stream.
    SessionStream,
}

/// One endpoint: its method, path and access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}

/// The router: every endpoint of `table`, each behind its access check
/// and, where they apply, the per-key rate limit and the cap on open streams.
pub(crate) fn router(state: AppState) -> Router {
    let mut router = Router::new();
    for (endpoint, _, handler) in table() {
        let handler = if stream_caps::applies(&endpoint) {
            handler.route_layer(middleware::from_fn_with_state(
                state.clone(),
                stream_caps::cap,
            ))
        } else {
            handler
        };
        let handler = if overload::applies(&endpoint) {
            handler.route_layer(middleware::from_fn_with_state(
                state.clone(),
                overload::refuse,
            ))
        } else {
            handler
        };
        let handler = if rate_limit::applies(&endpoint) {
            handler.route_layer(middleware::from_fn_with_state(
                state.clone(),
                rate_limit::limit,
            ))
        } else {
            handler
        };
        // The layer added last runs first: auth, the rate limit, the queue
        // bound, the stream cap.
        let handler = match endpoint.access {
            Access::Public => handler,
            access => handler.route_layer(middleware::from_fn_with_state(
                (state.clone(), access),
                auth::require_key,
            )),
        };
        // MCP's Origin check comes before everything (docs/mcp.md).
        let handler = if endpoint.path == "/mcp" {
            handler.route_layer(middleware::from_fn_with_state(state.clone(), mcp::origin))
        } else {
            handler
        };
        router = router.route(endpoint.path, handler);
    }
    if idempotency::exit_after_commit_suffix().is_some() {
        router = router.layer(middleware::from_fn(idempotency::exit_after_commit));
    }
    let cors = cors(&state.cors_origins);
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body_timeout::limit,
        ))
        .layer(middleware::from_fn(log_request))
        .layer(cors)
        .with_state(state)
}

/// CORS for browser clients on other origins: preflights allow
/// `Authorization`, `Content-Type`, `Last-Event-ID`, `Idempotency-Key` and
/// `MCP-Protocol-Version`. No origin is allowed
/// unless configured (`--cors-origin`); `*` allows any.
fn cors(origins: &[String]) -> CorsLayer {
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.trim()).ok()),
        )
    };
    CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("last-event-id"),
            idempotency::HEADER,
            // A browser's MCP client sends it on every request (docs/mcp.md).
            HeaderName::from_static("mcp-protocol-version"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}

impl Services {
    /// New turns are refused once shutdown began (they would not start).
    pub(crate) fn refuse_if_shutting_down(&self) -> Result<(), ApiError> {
        if *self.shutdown.borrow() {
            return Err(ApiError::new(
                ErrorCode::ShuttingDown,
                "the server is shutting down; retry in a moment",
            ));
        }
        Ok(())
    }
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint; see docs/api.md")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this endpoint does not accept that method; see docs/api.md",
    )
}

/// One log line per request. The query string is left out (it may carry cursors or tokens).
async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// Serves the API on `listener` until `shutdown` resolves, then stops
/// accepting and waits for open connections to close (`serve.rs`).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve::serve(listener, router(state), shutdown).await
}
