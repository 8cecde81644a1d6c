//! End users as principals: the tokens that authenticate them (minted by
//! this server, `minted`), and the per-app policy of the manifest's
//! `[end_users]` table. Documented in docs/end-users.md.

pub(crate) mod minted;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::keys::{EndUser, Principal, Scope};
use crate::secrets::MasterKey;
use crate::store::EndUsersRecord;
use minted::MintedTokens;

/// Why an end-user token was refused (HTTP 401, `code()` in the body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EndUserAuthError {
    #[error("the end-user token is malformed")]
    Malformed,
    #[error("the end-user token's signature does not verify")]
    InvalidSignature,
    #[error("the end-user token has expired")]
    Expired,
}

impl EndUserAuthError {
    /// The stable error code a client sees.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            EndUserAuthError::Malformed => "malformed_token",
            EndUserAuthError::InvalidSignature => "invalid_signature",
            EndUserAuthError::Expired => "token_expired",
        }
    }
}

/// Authenticates end-user tokens.
pub(crate) struct EndUsers {
    minted: MintedTokens,
}

impl EndUsers {
    pub(crate) fn new(master: &MasterKey) -> EndUsers {
        EndUsers {
            minted: MintedTokens::new(master),
        }
    }

    /// Whether `token` is meant as an end-user token (rather than an API key).
    pub(crate) fn claims_token(token: &str) -> bool {
        token.starts_with(minted::PREFIX)
    }

    /// The principal of a valid end-user token.
    pub(crate) fn authenticate(&self, token: &str) -> Result<Principal, EndUserAuthError> {
        let user = self.minted.verify(token)?;
        Ok(principal(
            user.app,
            EndUser {
                id: user.sub,
                claims: user.claims,
            },
        ))
    }

    /// Mints a token for user `sub` of `app`.
    pub(crate) fn mint(
        &self,
        app: Uuid,
        sub: &str,
        claims: Map<String, Value>,
        ttl: Duration,
    ) -> (String, String) {
        self.minted.mint(app, sub, claims, ttl)
    }
}

fn principal(app: Uuid, user: EndUser) -> Principal {
    Principal {
        key_id: user.key_id(app),
        name: "end user".into(),
        scope: Scope::App(app),
        user: Some(Arc::new(user)),
    }
}

/// The claims of `user` that `policy` lets through to the journal and the
/// agent (none without an `[end_users]` table).
pub(crate) fn allowed_claims(
    user: &EndUser,
    policy: Option<&EndUsersRecord>,
) -> Map<String, Value> {
    let Some(policy) = policy else {
        return Map::new();
    };
    user.claims
        .iter()
        .filter(|(name, _)| policy.claims.iter().any(|allowed| allowed == *name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Whether a client-chosen name sent with a bare invocation key (an AG-UI
/// `threadId`, an `Idempotency-Key`) is unguessable: a UUID version 4 (122
/// random bits, as `crypto.randomUUID()` makes), or at least 22 characters
/// of URL-safe base64 (16 random bytes encode to 22).
pub(crate) fn unguessable(name: &str) -> bool {
    if let Ok(id) = Uuid::try_parse(name) {
        return id.get_version_num() == 4;
    }
    name.len() >= 22
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unguessable_names_pass() {
        for ok in [
            "5f0c6ad2-8d4b-4d6e-9c1a-2f4e8b9d0a7c",
            "kq3_Vx9-Lm2PzR8tYw4HbN",
            &uuid::Builder::from_random_bytes(rand::random())
                .into_uuid()
                .to_string(),
        ] {
            assert!(unguessable(ok), "{ok}");
        }
        for weak in [
            "order-1234",
            "1732612345678",
            &Uuid::now_v7().to_string(),
            "short_but_random",
            "has spaces but is long enough ok",
        ] {
            assert!(!unguessable(weak), "{weak}");
        }
    }

    #[test]
    fn only_listed_claims_pass() {
        let mut claims = Map::new();
        claims.insert("email".into(), "a@example.com".into());
        claims.insert("role".into(), "admin".into());
        let user = EndUser {
            id: "alice".into(),
            claims,
        };
        assert!(allowed_claims(&user, None).is_empty());
        let policy = EndUsersRecord {
            claims: vec!["email".into(), "name".into()],
            ..EndUsersRecord::default()
        };
        let allowed = allowed_claims(&user, Some(&policy));
        assert_eq!(allowed.len(), 1);
        assert_eq!(allowed["email"], "a@example.com");
    }
}
