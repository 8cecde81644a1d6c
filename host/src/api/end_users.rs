//! End users at the API: `POST /apps/{id}/end-user-tokens` (minting), and
//! the checks the session endpoints share: which app an end user may name,
//! what a bare invocation key may still do under `[end_users] required`,
//! and the unguessable names a bare invocation key must send.

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
use crate::journal::payloads::EndUserInfo;
use crate::keys::{Principal, Scope};
use crate::store::{AppRecord, EndUsersRecord};

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

/// A stream token for `session`, minted by `principal`; an end user's is
/// bound to their revocation (`tokens.rs`).
pub(super) async fn mint_stream_token(
    state: &AppState,
    session: Uuid,
    principal: &Principal,
) -> Result<(String, String), ApiError> {
    let revoked = match principal.user {
        Some(_) => {
            (state.end_users.revocations())
                .not_before(&principal.key_id, &state.store)
                .await?
        }
        None => None,
    };
    Ok(state.tokens.mint(session, &principal.key_id, revoked))
}

/// The `[end_users]` policy of `app`'s current deployment, if any.
pub(super) async fn policy(
    state: &AppState,
    app: Uuid,
) -> Result<Option<EndUsersRecord>, ApiError> {
    let found = state
        .store
        .read(move |s| {
            let Some(app) = s.app(&app.to_string())? else {
                return Ok(None);
            };
            match app.current_deployment {
                Some(id) => Ok(s.deployment(id)?.and_then(|d| d.end_users)),
                None => Ok(None),
            }
        })
        .await?;
    Ok(found)
}

/// 401 for a bare invocation key on an app whose `[end_users]` says `required`.
fn token_required() -> ApiError {
    ApiError::new(
        ErrorCode::EndUserTokenRequired,
        "this app's sessions need an end-user token (`[end_users] required = true`): send `Authorization: Bearer <end-user token>` instead of the invocation key",
    )
}

/// Refuses a bare invocation key where the app requires end-user tokens.
pub(super) async fn refuse_bare_key_if_required(
    state: &AppState,
    principal: &Principal,
    app: Uuid,
) -> Result<Option<EndUsersRecord>, ApiError> {
    if principal.is_platform() {
        return Ok(None);
    }
    let policy = policy(state, app).await?;
    if principal.is_bare_invocation() && policy.as_ref().is_some_and(|p| p.required) {
        return Err(token_required());
    }
    Ok(policy)
}

/// `refuse_bare_key_if_required` where the policy itself is not needed: no
/// read for a platform key or an end user.
pub(super) async fn refuse_bare_key(
    state: &AppState,
    principal: &Principal,
    app: Uuid,
) -> Result<(), ApiError> {
    if principal.is_bare_invocation() {
        refuse_bare_key_if_required(state, principal, app).await?;
    }
    Ok(())
}

/// Whether an end user's token names `named` (an app id or slug) as its
/// app. Without looking anything up: the answer must not tell whether
/// another app exists.
pub(super) fn refuse_other_app(
    principal: &Principal,
    named: &str,
    slug_of_own: Option<&str>,
) -> Result<(), ApiError> {
    let (Scope::App(own), Some(_)) = (principal.scope, &principal.user) else {
        return Ok(());
    };
    // An app is named by its slug or by its id in any form `Uuid::parse_str`
    // reads (hyphenated, simple, `urn:uuid:`, braced), as the rest of the API.
    let names_own_id = uuid::Uuid::parse_str(named).is_ok_and(|id| id == own);
    if names_own_id || slug_of_own == Some(named) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::TokenForAnotherApp,
        "this end-user token is for another app",
    ))
}

/// The slug of the end user's own app (to compare with a name in a request).
pub(super) async fn own_slug(
    state: &AppState,
    principal: &Principal,
) -> Result<Option<String>, ApiError> {
    let (Scope::App(own), Some(_)) = (principal.scope, &principal.user) else {
        return Ok(None);
    };
    let app: Option<AppRecord> = state.store.read(move |s| s.app(&own.to_string())).await?;
    Ok(app.map(|app| app.slug))
}

/// What `SESSION_CREATED` records of the caller: the end user and their
/// allowed claims, for an end user.
pub(super) fn owner(principal: &Principal, policy: Option<&EndUsersRecord>) -> Option<EndUserInfo> {
    let user = principal.user.as_deref()?;
    Some(EndUserInfo {
        id: user.id.clone(),
        claims: end_users::allowed_claims(user, policy),
    })
}

/// 422 unless `value` (named `what`) is unguessable, for a bare invocation
/// key: with a key every end user holds, such a name is the only secret.
pub(super) fn require_unguessable(
    principal: &Principal,
    what: &str,
    value: &str,
) -> Result<(), ApiError> {
    if principal.is_bare_invocation() && !end_users::unguessable(value) {
        return Err(ApiError::new(
            ErrorCode::GuessableName,
            format!(
                "{what} sent with an invocation key is a secret every end user could guess: use a random UUID (version 4) or at least 22 characters of URL-safe base64, or authenticate the end user (docs/end-users.md)"
            ),
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn end_user_of(app: uuid::Uuid) -> Principal {
        let user = crate::keys::EndUser {
            id: "u".into(),
            claims: Default::default(),
        };
        Principal {
            key_id: user.key_id(app),
            name: "u".into(),
            scope: Scope::App(app),
            user: Some(std::sync::Arc::new(user)),
        }
    }

    #[test]
    fn an_end_user_may_name_their_own_app_in_every_form_of_its_id() {
        let own = uuid::Uuid::now_v7();
        let principal = end_user_of(own);
        for named in [
            own.to_string(),
            own.simple().to_string(),
            own.urn().to_string(),
            own.braced().to_string(),
            own.to_string().to_uppercase(),
            "support".to_string(),
        ] {
            assert!(
                refuse_other_app(&principal, &named, Some("support")).is_ok(),
                "{named}"
            );
        }
        let other = uuid::Uuid::now_v7();
        for named in [
            other.to_string(),
            other.urn().to_string(),
            "billing".to_string(),
            "".to_string(),
        ] {
            assert!(
                refuse_other_app(&principal, &named, Some("support")).is_err(),
                "{named}"
            );
        }
    }
}
