//! `POST /deployments` (multipart upload; the build runs off-request) and
//! `GET /apps/{id}/deployments`.

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::extract::{Json, Multipart, Path};
use super::{ApiError, AppState, views};
use crate::build::manifest::{MAX_MANIFEST_BYTES, Manifest};
use crate::store::{BuildOutcome, NewDeployment};

pub async fn create(
    State(state): State<AppState>,
    Multipart(mut multipart): Multipart,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let upload = state.builder.upload_path().map_err(ApiError::internal)?;
    let result = receive(&mut multipart, &upload).await;
    let manifest_text = match result {
        Ok(text) => text,
        Err(err) => {
            let _ = tokio::fs::remove_file(&upload).await;
            return Err(err);
        }
    };
    let accepted = accept(&state, &manifest_text, &upload).await;
    if accepted.is_err() {
        let _ = tokio::fs::remove_file(&upload).await;
    }
    accepted
}

/// Reads the parts: the bundle streams to `upload`, the manifest is returned.
async fn receive(
    multipart: &mut axum::extract::Multipart,
    upload: &std::path::Path,
) -> Result<String, ApiError> {
    let mut manifest = None;
    let mut have_bundle = false;
    while let Some(mut field) = multipart.next_field().await? {
        match field.name() {
            Some("tarball") => {
                let mut file = tokio::fs::File::create(upload)
                    .await
                    .map_err(ApiError::internal)?;
                while let Some(chunk) = field.chunk().await? {
                    file.write_all(&chunk).await.map_err(ApiError::internal)?;
                }
                file.sync_all().await.map_err(ApiError::internal)?;
                have_bundle = true;
            }
            Some("manifest") => {
                let bytes = field.bytes().await?;
                if bytes.len() > MAX_MANIFEST_BYTES {
                    return Err(ApiError::unprocessable(
                        "invalid_manifest",
                        format!("the manifest is larger than {MAX_MANIFEST_BYTES} bytes"),
                    ));
                }
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
                    ApiError::unprocessable("invalid_manifest", "the manifest is not UTF-8 text")
                })?;
                manifest = Some(text);
            }
            other => {
                return Err(ApiError::bad_request(
                    "bad_multipart",
                    format!(
                        "unexpected part `{}`: send `tarball` and `manifest`",
                        other.unwrap_or("")
                    ),
                ));
            }
        }
    }
    if !have_bundle {
        return Err(ApiError::bad_request(
            "bad_multipart",
            "missing part `tarball`",
        ));
    }
    manifest.ok_or_else(|| ApiError::bad_request("bad_multipart", "missing part `manifest`"))
}

async fn accept(
    state: &AppState,
    manifest_text: &str,
    upload: &std::path::Path,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let manifest = Manifest::parse(manifest_text)
        .map_err(|e| ApiError::unprocessable("invalid_manifest", e.to_string()))?;
    let record = state
        .writer
        .create_deployment(NewDeployment {
            app_slug: manifest.app.slug.clone(),
            version: manifest.app.version,
            manifest: manifest_text.to_string(),
            entry: manifest.agent.entry.clone(),
        })
        .await?;
    if let Err(err) = state.builder.enqueue(&record, upload) {
        tracing::error!(deployment = %record.id, error = %err, "cannot queue the build");
        let message = "the host could not store the bundle for its build".to_string();
        state
            .writer
            .finish_build(record.id, BuildOutcome::Failed(message))
            .await?;
        return Err(ApiError::internal(err));
    }
    let app_id = record.app_id;
    let app = state
        .store
        .read(move |s| s.app(&app_id.to_string()))
        .await?
        .ok_or_else(|| ApiError::internal("a new deployment's app is missing"))?;
    Ok((StatusCode::ACCEPTED, Json(views::deployment(&record, &app))))
}

pub async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let key = id.clone();
    let rows = state
        .store
        .read(move |s| {
            let Some(app) = s.app(&key)? else {
                return Ok(None);
            };
            let rows = s.deployments(app.id)?;
            Ok(Some(
                rows.iter().map(|d| views::deployment(d, &app)).collect(),
            ))
        })
        .await?;
    rows.map(Json)
        .ok_or_else(|| ApiError::not_found("app_not_found", format!("app `{id}` not found")))
}
