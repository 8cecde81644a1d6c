//! The HTTP API (axum): one router listing every route, auth, errors, logging.
//!
//! Only this module knows axum. Handlers translate HTTP to calls on the
//! store, the writer, the runtime and the builder, and back.

mod approvals;
mod apps;
mod auth;
mod deployments;
mod error;
mod events;
mod extract;
mod health;
mod sessions;
mod views;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use tokio::sync::watch;
use uuid::Uuid;

pub use error::ApiError;

use crate::build::Builder;
use crate::keys::Keys;
use crate::runtime::Runtime;
use crate::store::{Store, WriterHandle};

/// Largest request body of the JSON endpoints.
pub const JSON_BODY_LIMIT: usize = 1 << 20;
/// Largest `POST /deployments` body (the bundle and the manifest).
pub const BUNDLE_BODY_LIMIT: usize = 128 << 20;

/// What every handler can reach.
pub struct Services {
    pub store: Store,
    pub writer: WriterHandle,
    pub runtime: Arc<Runtime>,
    pub builder: Builder,
    pub keys: Keys,
    /// This process's id, recorded on the turns it schedules.
    pub boot_id: Uuid,
    /// Becomes `true` when the server shuts down: open streams end.
    pub shutdown: watch::Receiver<bool>,
}

pub type AppState = Arc<Services>;

/// Every route of the API, in one place.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/sessions", post(sessions::create).get(sessions::list))
        .route("/sessions/{id}", get(sessions::get))
        .route("/sessions/{id}/input", post(sessions::input))
        .route("/sessions/{id}/events", get(events::stream))
        .route("/sessions/{id}/approval", post(approvals::decide))
        .route("/approvals", get(approvals::list))
        .route("/apps", get(apps::list))
        .route("/apps/{id}", get(apps::get))
        .route("/apps/{id}/deployments", get(deployments::list))
        .route(
            "/deployments",
            post(deployments::create).layer(DefaultBodyLimit::max(BUNDLE_BODY_LIMIT)),
        )
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(protected)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such endpoint; see docs/api.md")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
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

/// Serves until `shutdown` resolves, then stops accepting and drains.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
