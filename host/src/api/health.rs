//! `GET /healthz` (the process answers) and `GET /readyz` (it can serve), no
//! key needed; `GET /metrics` (OpenMetrics text, platform key).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::AppState;
use super::extract::Json;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    if state.store.is_degraded() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not_ready", "reason": "storage failed; writes are stopped"})),
        );
    }
    match state.store.read(|s| s.apps().map(|_| ())).await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(err) => {
            tracing::error!(error = %err, "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "not_ready", "reason": "storage is unavailable"})),
            )
        }
    }
}

pub async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::get().encode(),
    )
}
