//! `Caller`: who sent a request, resolved once after authentication (an
//! axum extractor over the `Principal` that `auth.rs` put on the request),
//! and what that caller may reach: which app (`app`), which session
//! (`session`), the early "token required" refusal of a bare invocation key
//! (the writer decides again against the deployment a command pins,
//! `store::By::may_act`), the unguessable names a bare key must send, the
//! `By` its commands carry into the writer, and its stream tokens.

use std::ops::Deref;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use uuid::Uuid;

use super::extract::session_id;
use super::{ApiError, AppState, ErrorCode};
use crate::end_users;
use crate::keys::{Principal, Scope};
use crate::store::{AppRecord, By, EndUsersRecord, PolicyRefusal, SessionRecord, StoreError};

/// The authenticated caller of a request.
#[derive(Clone)]
pub(crate) struct Caller(pub Principal);

impl Deref for Caller {
    type Target = Principal;

    fn deref(&self) -> &Principal {
        &self.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.extensions.get::<Principal>() {
            Some(principal) => Ok(Caller(principal.clone())),
            // `auth.rs` runs before every route that takes a caller.
            None => Err(ApiError::new(
                ErrorCode::Unauthorized,
                "this endpoint needs an API key",
            )),
        }
    }
}

impl Caller {
    /// Who this caller's commands act for, in the writer.
    pub(crate) fn by(&self) -> By {
        let key_id = self.key_id.clone();
        match (&self.scope, &self.user) {
            (_, Some(user)) => By::EndUser {
                key_id,
                user: user.id.clone(),
                claims: user.claims.clone(),
            },
            (Scope::Platform, None) => By::Platform { key_id },
            (_, None) => By::AppKey {
                key_id,
                source: self.source.map(super::client_addr::share_key),
            },
        }
    }

    /// The app `named` (an id or slug), if this caller may create sessions
    /// of it: 404 otherwise (an invocation key or end user never learns
    /// that another app exists), and 401 early for a bare invocation key
    /// where the app's current deployment requires end-user tokens.
    pub(crate) async fn app(&self, state: &AppState, named: &str) -> Result<AppRecord, ApiError> {
        // An end user names only their own app (the same answer whether
        // another app exists or not).
        if self.user.is_some() {
            let own_slug = self.own_slug(state).await?;
            self.refuse_other_app(named, own_slug.as_deref())?;
        }
        let key = named.to_string();
        let app = state.store.read(move |s| s.app(&key)).await?;
        let Some(app) = app.filter(|app| self.may_use_app(app.id)) else {
            return Err(ApiError::new(
                ErrorCode::AppNotFound,
                format!("app `{named}` not found"),
            ));
        };
        self.refuse_bare_key(state, app.id).await?;
        Ok(app)
    }

    /// The session, if this caller may reach it; 404 otherwise (an
    /// invocation key never learns that another app's session exists).
    pub(crate) async fn session(
        &self,
        state: &AppState,
        raw_id: &str,
    ) -> Result<SessionRecord, ApiError> {
        let id = session_id(raw_id)?;
        let not_found = || {
            ApiError::new(
                ErrorCode::SessionNotFound,
                format!("session `{id}` not found"),
            )
        };
        let record = state
            .store
            .read(move |s| s.session(id))
            .await?
            .ok_or_else(not_found)?;
        if !self.may_use_session(record.id, record.app_id, record.end_user.as_deref()) {
            return Err(not_found());
        }
        self.refuse_bare_key(state, record.app_id).await?;
        Ok(record)
    }

    /// 401 early for a bare invocation key where `app`'s current deployment
    /// requires end-user tokens (no read for anyone else).
    async fn refuse_bare_key(&self, state: &AppState, app: Uuid) -> Result<(), ApiError> {
        if !self.is_bare_invocation() {
            return Ok(());
        }
        if policy(state, app).await?.is_some_and(|p| p.required) {
            return Err(StoreError::Policy(PolicyRefusal::TokenRequired).into());
        }
        Ok(())
    }

    /// 403 when an end user's token names another app than `named` (an app
    /// id or slug), without looking anything up: the answer must not tell
    /// whether another app exists.
    pub(crate) fn refuse_other_app(
        &self,
        named: &str,
        slug_of_own: Option<&str>,
    ) -> Result<(), ApiError> {
        let (Scope::App(own), Some(_)) = (self.scope, &self.user) else {
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
    pub(crate) async fn own_slug(&self, state: &AppState) -> Result<Option<String>, ApiError> {
        let (Scope::App(own), Some(_)) = (self.scope, &self.user) else {
            return Ok(None);
        };
        let app: Option<AppRecord> = state.store.read(move |s| s.app(&own.to_string())).await?;
        Ok(app.map(|app| app.slug))
    }

    /// `require_unguessable` for this caller.
    pub(crate) fn require_unguessable(&self, what: &str, value: &str) -> Result<(), ApiError> {
        require_unguessable(self, what, value)
    }

    /// A stream token for `session`, minted for this caller; an end user's
    /// is bound to their revocation (`tokens.rs`).
    pub(crate) async fn stream_token(
        &self,
        state: &AppState,
        session: Uuid,
    ) -> Result<(String, String), ApiError> {
        let revoked = match self.user {
            Some(_) => {
                (state.end_users.revocations())
                    .not_before(&self.key_id, &state.store)
                    .await?
            }
            None => None,
        };
        Ok(state.tokens.mint(session, &self.key_id, revoked))
    }
}

/// 422 unless `value` (named `what`) is unguessable, for a bare invocation
/// key: with a key every end user holds, such a name is the only secret.
pub(crate) fn require_unguessable(
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

/// The `[end_users]` policy of `app`'s current deployment, if any.
pub(crate) async fn policy(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn end_user_of(app: uuid::Uuid) -> Caller {
        let user = crate::keys::EndUser {
            id: "u".into(),
            claims: Default::default(),
        };
        Caller(Principal {
            key_id: user.key_id(app),
            name: "u".into(),
            scope: Scope::App(app),
            user: Some(std::sync::Arc::new(user)),
            source: None,
        })
    }

    #[test]
    fn an_end_user_may_name_their_own_app_in_every_form_of_its_id() {
        let own = uuid::Uuid::now_v7();
        let caller = end_user_of(own);
        for named in [
            own.to_string(),
            own.simple().to_string(),
            own.urn().to_string(),
            own.braced().to_string(),
            own.to_string().to_uppercase(),
            "support".to_string(),
        ] {
            assert!(
                caller.refuse_other_app(&named, Some("support")).is_ok(),
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
                caller.refuse_other_app(&named, Some("support")).is_err(),
                "{named}"
            );
        }
    }
}
