//! `POST /deployments` (multipart upload; the build runs off-request; takes
//! an `Idempotency-Key`) and `GET /apps/{id}/deployments`.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use tokio::io::AsyncWriteExt;

use super::extract::{Json, Multipart, Path};
use super::idempotency::{Fingerprint, idempotency, key_of};
use super::views::DeploymentView;
use super::{ApiError, AppState, BUNDLE_BODY_LIMIT};
use crate::api::ErrorCode;
use crate::build::manifest::{MAX_MANIFEST_BYTES, Manifest};
use crate::keys::Principal;
use crate::runtime::valid_tool_name;
use crate::store::{BuildOutcome, DeploymentRecord, Idempotency, NewDeployment};

pub(super) async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    Multipart(mut multipart): Multipart,
) -> Result<(StatusCode, Json<DeploymentView>), ApiError> {
    let key = key_of(&headers)?;
    // A body declared over the limit is refused before any of it is read.
    let declared = (headers.get(header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > BUNDLE_BODY_LIMIT as u64) {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a deployment's body is at most {BUNDLE_BODY_LIMIT} bytes"),
        ));
    }
    let upload = state.builder.upload_path().map_err(ApiError::internal)?;
    let mut fingerprint = Fingerprint::new("POST", "/deployments");
    let result = receive(&mut multipart, &upload, &mut fingerprint).await;
    let parts = match result {
        Ok(parts) => parts,
        Err(err) => {
            let _ = tokio::fs::remove_file(&upload).await;
            return Err(err);
        }
    };
    let key = idempotency(key, &principal, fingerprint)?;
    let accepted = accept(&state, &parts, &upload, key).await;
    // Refused, or a retry answered with the first attempt's row: this
    // upload is not built.
    if !matches!(accepted, Ok((_, true))) {
        let _ = tokio::fs::remove_file(&upload).await;
    }
    accepted.map(|(row, _)| row)
}

/// The small parts of an upload (the bundle itself streams to a file).
struct Parts {
    manifest: String,
    /// The operator's approval policy: a JSON array of tool names.
    approval_policy: Option<String>,
}

/// Reads the parts: the bundle streams to `upload`, the rest is returned;
/// every part goes into the request's fingerprint (its parts, not its raw
/// bytes: a retry's multipart boundary may differ).
async fn receive(
    multipart: &mut axum::extract::Multipart,
    upload: &std::path::Path,
    fingerprint: &mut Fingerprint,
) -> Result<Parts, ApiError> {
    let mut manifest = None;
    let mut approval_policy = None;
    let mut have_bundle = false;
    while let Some(mut field) = multipart.next_field().await? {
        match field.name() {
            Some("tarball") => {
                let mut file = tokio::fs::File::create(upload)
                    .await
                    .map_err(ApiError::internal)?;
                fingerprint.part_start("tarball");
                while let Some(chunk) = field.chunk().await? {
                    fingerprint.update(&chunk);
                    file.write_all(&chunk).await.map_err(ApiError::internal)?;
                }
                file.sync_all().await.map_err(ApiError::internal)?;
                have_bundle = true;
            }
            Some("manifest") => {
                let bytes = field.bytes().await?;
                fingerprint.part("manifest", &bytes);
                if bytes.len() > MAX_MANIFEST_BYTES {
                    return Err(ApiError::new(
                        ErrorCode::InvalidManifest,
                        format!("the manifest is larger than {MAX_MANIFEST_BYTES} bytes"),
                    ));
                }
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
                    ApiError::new(ErrorCode::InvalidManifest, "the manifest is not UTF-8 text")
                })?;
                manifest = Some(text);
            }
            Some("approval_policy") => {
                let bytes = field.bytes().await?;
                fingerprint.part("approval_policy", &bytes);
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
                    ApiError::new(
                        ErrorCode::InvalidApprovalPolicy,
                        "the policy is not UTF-8 text",
                    )
                })?;
                approval_policy = Some(text);
            }
            other => {
                return Err(ApiError::new(
                    ErrorCode::BadMultipart,
                    format!(
                        "unexpected part `{}`: send `tarball`, `manifest` and optionally `approval_policy`",
                        other.unwrap_or("")
                    ),
                ));
            }
        }
    }
    if !have_bundle {
        return Err(ApiError::new(
            ErrorCode::BadMultipart,
            "missing part `tarball`",
        ));
    }
    let manifest = manifest
        .ok_or_else(|| ApiError::new(ErrorCode::BadMultipart, "missing part `manifest`"))?;
    Ok(Parts {
        manifest,
        approval_policy,
    })
}

/// Largest `approval_policy` part.
const MAX_POLICY_BYTES: usize = 16 * 1024;

/// Parses `SERVICE_APPROVAL_POLICY`: a JSON array of tool names.
fn parse_policy(text: Option<&str>) -> Result<Vec<String>, ApiError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    let invalid = |detail: String| {
        ApiError::new(
            ErrorCode::InvalidApprovalPolicy,
            format!("`approval_policy` must be a JSON array of tool names: {detail}"),
        )
    };
    if text.len() > MAX_POLICY_BYTES {
        return Err(invalid(format!(
            "it is larger than {MAX_POLICY_BYTES} bytes"
        )));
    }
    let mut names: Vec<String> = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if let Some(bad) = names.iter().find(|n| !valid_tool_name(n)) {
        return Err(invalid(format!("`{bad}` is not a tool name")));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Registers the deployment and queues its build: `202` with its row, and
/// whether this upload is the one to build (not when a retry was answered
/// with its first attempt's row).
async fn accept(
    state: &AppState,
    parts: &Parts,
    upload: &std::path::Path,
    key: Option<Idempotency>,
) -> Result<((StatusCode, Json<DeploymentView>), bool), ApiError> {
    let manifest = Manifest::parse(&parts.manifest)
        .map_err(|e| ApiError::new(ErrorCode::InvalidManifest, e.to_string()))?;
    let approval_policy = parse_policy(parts.approval_policy.as_deref())?;
    if let Some(end_users) = &manifest.end_users {
        super::end_users::check_provider(state, &manifest.app.slug, &end_users.into()).await?;
    }
    let new = NewDeployment {
        app_slug: manifest.app.slug.clone(),
        version: manifest.app.version,
        manifest: parts.manifest.clone(),
        entry: manifest.agent.entry().to_owned(),
        manifest_gated: manifest.gated_tools(),
        approval_policy,
        secrets: manifest.agent.secrets.clone(),
        limits: (&manifest.limits).into(),
        outbound: manifest.outbound.allow.clone(),
        end_users: manifest.end_users.as_ref().map(Into::into),
        end_user_approvals: manifest.end_user_approvals(),
        llm_budget: manifest.llm.budget_per_session,
    };
    let done = state.writer.create_deployment_once(new, key).await?;
    let answer = done.answer;
    let row = DeploymentView::new(
        &answer.deployment,
        &answer.app,
        state.runtime.outbound_policy(),
    );
    let accepted = (StatusCode::ACCEPTED, Json(row));
    let Some(record) = done.work else {
        return Ok((accepted, false));
    };
    if let Err(err) = state.builder.enqueue(&record, upload).await {
        tracing::error!(deployment = %record.id, error = %err, "cannot queue the build");
        let message = "the host could not store the bundle for its build".to_string();
        state
            .writer
            .finish_build(record.id, BuildOutcome::Failed(message))
            .await?;
        // 503 when the store could not be reached: the client may retry.
        return Err(err.into());
    }
    Ok((accepted, true))
}

pub(super) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<DeploymentView>>, ApiError> {
    let key = id.clone();
    let policy = state.runtime.outbound_policy().clone();
    let rows = state
        .store
        .read(move |s| {
            let Some(app) = s.app(&key)? else {
                return Ok(None);
            };
            let rows = s.deployments(app.id)?;
            Ok(Some(
                rows.iter()
                    .map(|d| DeploymentView::new(d, &app, &policy))
                    .collect(),
            ))
        })
        .await?;
    rows.map(Json)
        .ok_or_else(|| ApiError::new(ErrorCode::AppNotFound, format!("app `{id}` not found")))
}

/// Makes a built deployment its app's current one (rollback or re-activation).
pub(super) async fn activate(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<DeploymentView>), ApiError> {
    let not_found = || {
        ApiError::new(
            ErrorCode::DeploymentNotFound,
            format!("deployment `{id}` not found"),
        )
    };
    let deployment = uuid::Uuid::parse_str(&id).map_err(|_| not_found())?;
    let record = state.writer.activate(deployment).await?;
    accepted_row(&state, &record, "an activated deployment's app is missing").await
}

/// `202` with a deployment's row (its app read back for the slug and flags).
async fn accepted_row(
    state: &AppState,
    record: &DeploymentRecord,
    missing_app: &'static str,
) -> Result<(StatusCode, Json<DeploymentView>), ApiError> {
    let app_id = record.app_id;
    let app = state
        .store
        .read(move |s| s.app(&app_id.to_string()))
        .await?
        .ok_or_else(|| ApiError::internal(missing_app))?;
    let row = DeploymentView::new(record, &app, state.runtime.outbound_policy());
    Ok((StatusCode::ACCEPTED, Json(row)))
}
