//! `GET /healthz` (the process answers) and `GET /readyz` (it can serve), no
//! key needed; `GET /metrics` (OpenMetrics text, platform key).
//!
//! `/readyz` is public and unthrottled, so its answer is cached for
//! `READY_TTL` and one probe of the store runs at a time: a flood of probes
//! costs the store one read a second, not one per request.

use std::time::{Duration, Instant};

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

/// How long a store probe's answer is reused.
const READY_TTL: Duration = Duration::from_secs(1);

/// The last probe of the store and when it ran; held while one runs.
#[derive(Default)]
pub(crate) struct ReadyProbe(tokio::sync::Mutex<Option<(Instant, bool)>>);

pub(super) async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    if state.store.is_degraded() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            health("not_ready", Some("storage failed; writes are stopped")),
        );
    }
    let mut last = state.ready.0.lock().await;
    let ready = match *last {
        Some((at, ready)) if at.elapsed() < READY_TTL => ready,
        _ => {
            crate::metrics::get().ready_probes.inc();
            let ready = match state.store.read(|s| s.apps().map(|_| ())).await {
                Ok(()) => true,
                Err(err) => {
                    tracing::error!(error = %err, "not ready");
                    false
                }
            };
            *last = Some((Instant::now(), ready));
            ready
        }
    };
    drop(last);
    if ready {
        (StatusCode::OK, health("ready", None))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            health("not_ready", Some("storage is unavailable")),
        )
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
