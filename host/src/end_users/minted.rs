//! End-user tokens the server mints (`POST /apps/{id}/end-user-tokens`),
//! for backends without an identity provider of their own.
//!
//! A token is `ahu1.<payload>.<tag>`: the payload is the base64url JSON
//! `{"app", "sub", "iat", "exp", "claims"?}`, the tag its HMAC-SHA256 (base64url)
//! under a key derived from the master key, so a token is valid on every
//! host that shares the master key, and across restarts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::Sha256;
use uuid::Uuid;

use super::EndUserAuthError;
use crate::secrets::MasterKey;

/// The prefix of a minted token.
pub(crate) const PREFIX: &str = "ahu1.";
/// Longest a minted token may live (a day); the default is an hour.
pub(crate) const MAX_TTL_SECS: u64 = 24 * 60 * 60;
pub(crate) const DEFAULT_TTL_SECS: u64 = 60 * 60;
/// Longest user id, in characters (as the API's schema counts them).
pub(crate) const MAX_USER_CHARS: usize = 256;
/// Largest claims object, in bytes of JSON.
pub(crate) const MAX_CLAIMS_BYTES: usize = 16 * 1024;
/// Longest token accepted (a bound on what a request can make us decode):
/// the largest claims, base64url, with the rest of the payload and the tag.
const MAX_TOKEN_BYTES: usize = 24 * 1024;

#[derive(Serialize, Deserialize)]
struct Payload {
    app: Uuid,
    sub: String,
    iat: u64,
    exp: u64,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    claims: Map<String, Value>,
    /// When it was minted, Unix ms (a revocation's not-before is in ms;
    /// tokens without it are judged by `iat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat_ms: Option<u64>,
}

/// What a valid minted token says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MintedUser {
    pub app: Uuid,
    pub sub: String,
    pub claims: Map<String, Value>,
    /// Unix ms the token was minted.
    pub issued_ms: u64,
}

/// Mints and verifies end-user tokens.
pub(crate) struct MintedTokens {
    key: [u8; 32],
}

fn malformed() -> EndUserAuthError {
    EndUserAuthError::MalformedToken("it is not a token this server minted".into())
}

fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl MintedTokens {
    pub(crate) fn new(master: &MasterKey) -> MintedTokens {
        MintedTokens {
            key: master.derive("agenthost end-user tokens v1"),
        }
    }

    fn mac(&self, payload: &str) -> Hmac<Sha256> {
        crate::secrets::hmac(&self.key, payload.as_bytes())
    }

    /// A token for user `sub` of `app`, valid `ttl`; returns it and its
    /// expiry as an RFC 3339 timestamp. The caller has checked the bounds.
    /// `not_before`: the user's revocation (Unix ms), if any: the token is
    /// minted after it, whatever this host's clock says.
    pub(crate) fn mint(
        &self,
        app: Uuid,
        sub: &str,
        claims: Map<String, Value>,
        ttl: Duration,
        not_before: Option<u64>,
    ) -> (String, String) {
        let iat_ms = unix_now_ms().max(not_before.map_or(0, |ms| ms + 1));
        let iat = iat_ms / 1000;
        let exp = unix_now() + ttl.as_secs();
        let payload = Payload {
            app,
            sub: sub.to_string(),
            iat,
            exp,
            claims,
            iat_ms: Some(iat_ms),
        };
        let json = serde_json::to_vec(&payload)
            .unwrap_or_else(|_| unreachable!("a payload of strings and JSON values serializes"));
        let body = B64.encode(json);
        let tag = B64.encode(self.mac(&body).finalize().into_bytes());
        let at = UNIX_EPOCH + Duration::from_secs(exp);
        (
            format!("{PREFIX}{body}.{tag}"),
            humantime::format_rfc3339_seconds(at).to_string(),
        )
    }

    /// The user of a valid, unexpired token.
    pub(crate) fn verify(&self, token: &str) -> Result<MintedUser, EndUserAuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(malformed());
        }
        let rest = token.strip_prefix(PREFIX).ok_or_else(malformed)?;
        let (body, tag) = rest.split_once('.').ok_or_else(malformed)?;
        let tag = B64.decode(tag).map_err(|_| malformed())?;
        self.mac(body)
            .verify_slice(&tag)
            .map_err(|_| EndUserAuthError::InvalidSignature)?;
        let json = B64.decode(body).map_err(|_| malformed())?;
        let payload: Payload = serde_json::from_slice(&json).map_err(|_| malformed())?;
        if payload.exp <= unix_now() {
            return Err(EndUserAuthError::TokenExpired);
        }
        Ok(MintedUser {
            app: payload.app,
            sub: payload.sub,
            claims: payload.claims,
            issued_ms: payload.iat_ms.unwrap_or(payload.iat.saturating_mul(1000)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> MintedTokens {
        let dir = tempfile::tempdir().unwrap();
        MintedTokens::new(&MasterKey::load(None, dir.path()).unwrap())
    }

    #[test]
    fn a_token_verifies_as_its_user_and_app_until_it_expires() {
        let tokens = tokens();
        let app = Uuid::now_v7();
        let mut claims = Map::new();
        claims.insert("email".into(), "a@example.com".into());
        let (token, _) = tokens.mint(app, "alice", claims.clone(), Duration::from_secs(60), None);
        let user = tokens.verify(&token).unwrap();
        assert_eq!((user.app, user.sub.as_str()), (app, "alice"));
        assert_eq!(user.claims, claims);
        let (expired, _) = tokens.mint(app, "alice", Map::new(), Duration::ZERO, None);
        assert_eq!(tokens.verify(&expired), Err(EndUserAuthError::TokenExpired));
    }

    #[test]
    fn a_changed_payload_or_another_masters_token_is_refused() {
        let tokens = tokens();
        let app = Uuid::now_v7();
        let (token, _) = tokens.mint(app, "alice", Map::new(), Duration::from_secs(60), None);
        // Mallory swaps in her own payload with Alice's tag.
        let (_, tag) = token.rsplit_once('.').unwrap();
        let forged_body = B64.encode(
            serde_json::to_vec(&Payload {
                app,
                sub: "bob".into(),
                iat: 0,
                exp: u64::MAX,
                claims: Map::new(),
                iat_ms: None,
            })
            .unwrap(),
        );
        let forged = format!("{PREFIX}{forged_body}.{tag}");
        assert_eq!(
            tokens.verify(&forged),
            Err(EndUserAuthError::InvalidSignature)
        );
        assert_eq!(
            super::tests::tokens().verify(&token),
            Err(EndUserAuthError::InvalidSignature),
            "another master key"
        );
        assert_eq!(tokens.verify("ahu1.x"), Err(malformed()));
        assert_eq!(
            tokens.verify(&"a".repeat(MAX_TOKEN_BYTES + 1)),
            Err(malformed())
        );
    }
}
