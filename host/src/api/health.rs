//! `GET /healthz` (the process answers) and `GET /readyz` (it can serve), no
//! key needed; `GET /metrics` (OpenMetrics text, platform key).

use super::views::Health;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::AppState;
use super::extract::Json;

fn health(status: &str, reason: Option<&str>) -> Json<Health> {
    Json(Health {
        status: status.into(),
        reason: reason.map(Into::into),
    })
}

pub(super) async fn healthz() -> Json<Health> {
    health("ok", None)
}

pub(super) async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    if state.store.is_degraded() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            health("not_ready", Some("storage failed; writes are stopped")),
        );
    }
    match state.store.read(|s| s.apps().map(|_| ())).await {
        Ok(()) => (StatusCode::OK, health("ready", None)),
        Err(err) => {
            tracing::error!(error = %err, "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                health("not_ready", Some("storage is unavailable")),
            )
        }
    }
}

pub(super) async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::get().encode(),
    )
}
