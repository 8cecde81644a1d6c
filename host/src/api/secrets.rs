//! `PUT /secrets/{key}`, `GET /secrets` (names and times, never values),
//! `DELETE /secrets/{key}`. Values are sealed before they reach the writer
//! and never appear in a response, a log line or an error.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use super::extract::{Json, Path};
use super::views::SecretView;
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::secrets::{MAX_SECRET_BYTES, valid_name};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PutSecret {
    value: String,
}

fn check_name(name: &str) -> Result<(), ApiError> {
    if valid_name(name) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::InvalidSecretName,
        "a secret name is an environment variable name: letters, digits and _, not starting with a digit, at most 128 bytes, and not starting with SERVICE_ or AGENTHOST_",
    ))
}

pub(super) async fn put(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<PutSecret>,
) -> Result<(StatusCode, Json<SecretView>), ApiError> {
    check_name(&name)?;
    if body.value.len() > MAX_SECRET_BYTES {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("a secret value is at most {MAX_SECRET_BYTES} bytes"),
        ));
    }
    let sealed = state
        .vault
        .seal(&name, &body.value, None)
        .map_err(ApiError::internal)?;
    let (record, new) = state.writer.put_secret(sealed).await?;
    reload(&state, &name).await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(SecretView::from(&record))))
}

pub(super) async fn list(State(state): State<AppState>) -> Result<Json<Vec<SecretView>>, ApiError> {
    let records = state.store.read(|s| s.secrets()).await?;
    Ok(Json(records.iter().map(SecretView::from).collect()))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_name(&name)?;
    state.writer.delete_secret(name.clone()).await?;
    reload(&state, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Sets the in-memory vault's `name` from the store after a commit, in the
/// store's order: two racing writes' handlers may return in either order,
/// so each one sets what is stored, not what it wrote (see `Vault::reloads`).
async fn reload(state: &AppState, name: &str) -> Result<(), ApiError> {
    let _ordered = state.vault.reloads().lock().await;
    let lookup = name.to_string();
    let stored = (state.store)
        .read(move |s| Ok(s.secrets()?.into_iter().find(|r| r.name == lookup)))
        .await?;
    (state.vault)
        .apply(name, stored.as_ref())
        .map_err(ApiError::internal)?;
    Ok(())
}
