//! `PUT /secrets/{key}`, `GET /secrets` (names and times, never values),
//! `DELETE /secrets/{key}`. Values are sealed before they reach the writer
//! and never appear in a response, a log line or an error.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use super::extract::{Json, Path};
use super::views::SecretView;
use super::{ApiError, AppState};
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
    Err(ApiError::unprocessable(
        "invalid_secret_name",
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
        return Err(ApiError::unprocessable(
            "invalid_body",
            format!("a secret value is at most {MAX_SECRET_BYTES} bytes"),
        ));
    }
    let sealed = state
        .vault
        .seal(&name, &body.value, None)
        .map_err(ApiError::internal)?;
    let (record, new) = state.writer.put_secret(sealed).await?;
    state.vault.set(&name, Some(&body.value));
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
    state.vault.set(&name, None);
    Ok(StatusCode::NO_CONTENT)
}
