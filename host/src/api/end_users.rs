//! End users at the API: `POST /apps/{id}/end-user-tokens` (minting),
//! `POST /apps/{id}/end-users/{user}/revoke`, and the check of a deploy's
//! identity provider. What an end user may reach is the caller's
//! (`caller.rs`), and what they may do is decided in the writer
//! (`store::By`).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::extract::{Json, Path};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::end_users::{self, minted};
use crate::store::EndUsersRecord;

/// `POST /apps/{id}/end-user-tokens`.
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct MintEndUserToken {
    /// The end user's id in the app (1 to 256 characters): their sessions are theirs alone.
    #[schema(min_length = 1, max_length = 256)]
    user: String,
    /// Seconds the token is valid: 1 to 86400 (default 3600).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86400)]
    ttl_secs: Option<u64>,
    /// Claims the token carries (at most 16 KiB of JSON); only those the
    /// app's `[end_users] claims` lists reach the journal and the agent.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    claims: Option<Map<String, Value>>,
}

/// `201` of `POST /apps/{id}/end-user-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub(super) struct EndUserToken {
    /// Send as `Authorization: Bearer <token>`; shown once.
    pub token: String,
    pub app_id: Uuid,
    pub user: String,
    /// RFC 3339.
    pub expires_at: String,
}

pub(super) async fn mint(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(body): Json<MintEndUserToken>,
) -> Result<(StatusCode, Json<EndUserToken>), ApiError> {
    let length = body.user.chars().count();
    if length == 0 || length > minted::MAX_USER_CHARS {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("`user` must be 1 to {} characters", minted::MAX_USER_CHARS),
        ));
    }
    let ttl = body.ttl_secs.unwrap_or(minted::DEFAULT_TTL_SECS);
    if ttl == 0 || ttl > minted::MAX_TTL_SECS {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("`ttl_secs` must be 1 to {}", minted::MAX_TTL_SECS),
        ));
    }
    let claims = body.claims.unwrap_or_default();
    let size = serde_json::to_vec(&claims).map_or(usize::MAX, |bytes| bytes.len());
    if size > minted::MAX_CLAIMS_BYTES {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!(
                "`claims` must be at most {} bytes of JSON",
                minted::MAX_CLAIMS_BYTES
            ),
        ));
    }
    let key = id.clone();
    let app = (state.store.read(move |s| s.app(&key)).await?)
        .ok_or_else(|| ApiError::new(ErrorCode::AppNotFound, format!("app `{id}` not found")))?;
    // Read from the store itself: a token minted after a revocation made
    // on another host a moment ago is minted after it.
    let user_key = crate::keys::end_user_key(app.id, &body.user);
    let not_before = (state.store)
        .read(move |s| s.end_user_not_before(&user_key))
        .await?;
    let ttl = Duration::from_secs(ttl);
    let (token, expires_at) = (state.end_users).mint(app.id, &body.user, claims, ttl, not_before);
    Ok((
        StatusCode::CREATED,
        Json(EndUserToken {
            token,
            app_id: app.id,
            user: body.user,
            expires_at,
        }),
    ))
}

/// `200` of `POST /apps/{id}/end-users/{user}/revoke`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub(super) struct RevokedEndUser {
    pub app_id: Uuid,
    pub user: String,
    /// RFC 3339 (milliseconds): every token of the user issued at or before
    /// this is refused (401 `token_revoked`) on every host, their stream
    /// tokens too, and their open event streams end.
    pub not_before: String,
}

/// `POST /apps/{id}/end-users/{user}/revoke`: refuses every token of the
/// user issued until now, on every host.
pub(super) async fn revoke(
    State(state): State<AppState>,
    Path((id, user)): Path<(String, String)>,
) -> Result<Json<RevokedEndUser>, ApiError> {
    let length = user.chars().count();
    if length == 0 || length > minted::MAX_USER_CHARS {
        return Err(ApiError::new(
            ErrorCode::InvalidUser,
            format!(
                "the user id must be 1 to {} characters",
                minted::MAX_USER_CHARS
            ),
        ));
    }
    let key = id.clone();
    let app = (state.store.read(move |s| s.app(&key)).await?)
        .ok_or_else(|| ApiError::new(ErrorCode::AppNotFound, format!("app `{id}` not found")))?;
    let user_key = crate::keys::end_user_key(app.id, &user);
    let not_before = state.writer.revoke_end_user(user_key.clone()).await?;
    // Refused here at once (other hosts hear of it, `cluster.rs`), and
    // the user's open streams end.
    state.end_users.revocations().apply(&user_key, not_before);
    state.keys.end_streams(&user_key);
    Ok(Json(RevokedEndUser {
        app_id: app.id,
        user,
        not_before: end_users::rfc3339_ms(not_before),
    }))
}

/// A deploy's `[end_users]` identity provider: its JWKS URL as the server
/// takes it (https and public, unless `--allow-insecure-jwks`), and an
/// issuer and audience no other app uses (a token names its app by them).
pub(super) async fn check_provider(
    state: &AppState,
    slug: &str,
    policy: &EndUsersRecord,
) -> Result<(), ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidManifest, message);
    state
        .end_users
        .check_provider(policy)
        .map_err(|err| invalid(format!("`end_users.jwks_url`: {err}")))?;
    let (Some(issuer), Some(audience)) = (policy.issuer.clone(), policy.audience.clone()) else {
        return Ok(());
    };
    let slug = slug.to_string();
    let other = state
        .store
        .read(move |s| {
            for app in s.apps()? {
                let Some(current) = app.current_deployment.filter(|_| app.slug != slug) else {
                    continue;
                };
                let policy = s.deployment(current)?.and_then(|d| d.end_users);
                if policy.is_some_and(|p| {
                    p.issuer.as_deref() == Some(&issuer) && p.audience.as_deref() == Some(&audience)
                }) {
                    return Ok(Some(app.slug));
                }
            }
            Ok(None)
        })
        .await?;
    match other {
        Some(other) => Err(invalid(format!(
            "`[end_users]`: app `{other}` already takes tokens of this issuer and audience; give each app its own audience"
        ))),
        None => Ok(()),
    }
}
