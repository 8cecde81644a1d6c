//! Verifies an app's end-user JWTs against its identity provider's JWKS
//! (the manifest's `[end_users]` `jwks_url`, `issuer`, `audience`, `claims`).
//!
//! A token is accepted only if its header names RS256, ES256 or EdDSA (never
//! `none` nor an HMAC algorithm, so the public JWKS can never serve as a
//! secret) and a `kid` that the JWKS has for that algorithm, its signature
//! verifies, `exp` and `nbf` hold with at most [`LEEWAY_SECS`] of clock skew,
//! `iss` and `aud` are exactly the app's (`aud` a string or an array), and
//! `sub`, the user id, is a non-empty string.
//!
//! The JWKS is fetched on first use and cached by `kid`. A token naming an
//! unknown `kid` refetches it, so a rotated key is picked up without a
//! restart; fetches (of any cause) are at least [`REFETCH_INTERVAL`] apart
//! per verifier and one at a time, so a flood of unknown kids costs the
//! identity provider at most one request per interval. Keys older than
//! [`MAX_KEY_AGE`] are refreshed on the next token (keys that vanished from
//! the JWKS stop verifying); if that refresh fails, the known keys stay in use.
//! The fetch itself: `fetch.rs`. Documented in docs/end-users.md.

mod fetch;
mod keys;
#[cfg(test)]
mod tests;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Validation;
use serde_json::{Map, Value};

pub(crate) use super::error::EndUserAuthError;
use keys::{Alg, KeySet, VerifyKey};

/// The clock skew allowed on `exp` and `nbf`.
pub(crate) const LEEWAY_SECS: u64 = 60;
/// The least time between two fetches of one app's JWKS.
pub(crate) const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// How long fetched keys are trusted before the next token refreshes them.
pub(crate) const MAX_KEY_AGE: Duration = Duration::from_secs(10 * 60);
/// The longest token accepted (the claims end up in the journal).
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest `sub` (user id) accepted.
pub(crate) const MAX_SUBJECT_BYTES: usize = 256;

/// An app's identity provider, as its manifest names it.
#[derive(Clone, Debug)]
pub(crate) struct JwksConfig {
    pub(crate) jwks_url: String,
    pub(crate) issuer: String,
    pub(crate) audience: String,
    /// The claims, beyond `sub`, passed on to the session (others are dropped).
    pub(crate) claims: Vec<String>,
}

/// An end user whose token verified.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct VerifiedUser {
    /// The user id (`sub`).
    pub(crate) sub: String,
    /// Only the claims the app allows, those the token has.
    pub(crate) claims: Map<String, Value>,
    /// The token's `exp`, in Unix seconds.
    pub(crate) expires_at: u64,
    /// When it was issued, Unix ms: its `iat`, else its `nbf` (`None`:
    /// it has neither), for revocations (`end_users::revocation`).
    pub(crate) issued_ms: Option<u64>,
}

/// One app's verifier: its settings, its own HTTP client and the cached keys.
pub(crate) struct JwksVerifier {
    url: reqwest::Url,
    issuer: String,
    audience: String,
    claims: Vec<String>,
    client: reqwest::Client,
    cache: RwLock<Cache>,
    /// When the JWKS was last asked for (answered or not); held during a
    /// fetch, so fetches are one at a time.
    last_attempt: tokio::sync::Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Cache {
    keys: KeySet,
    /// When `keys` were fetched; `None` until the first fetch succeeds.
    fetched_at: Option<Instant>,
}

impl JwksVerifier {
    /// A verifier for `config`. The URL must be `https` and, when it is an
    /// address, a public one, unless `allow_insecure` (the operator's
    /// `--allow-insecure-jwks`); a host name's addresses are checked at
    /// each fetch. Fetches nothing yet.
    pub(crate) fn new(
        config: JwksConfig,
        allow_insecure: bool,
    ) -> Result<JwksVerifier, EndUserAuthError> {
        let url = fetch::check_url(&config.jwks_url, allow_insecure)?;
        Ok(JwksVerifier {
            url,
            issuer: config.issuer,
            audience: config.audience,
            claims: config.claims,
            client: fetch::client(allow_insecure)?,
            cache: RwLock::new(Cache::default()),
            last_attempt: tokio::sync::Mutex::new(None),
        })
    }

    /// Verifies an end user's bearer token (without the `Bearer ` prefix).
    pub(crate) async fn verify(&self, token: &str) -> Result<VerifiedUser, EndUserAuthError> {
        let header = read_header(token)?;
        let key = self.key(&header.kid, header.alg).await?;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(
            token,
            &key.key,
            &self.validation(header.alg),
        )?
        .claims;
        self.user(claims)
    }

    fn validation(&self, alg: Alg) -> Validation {
        let mut validation = Validation::new(alg.library());
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation
    }

    /// The checks the library leaves (it takes `iss` in an array too), and
    /// the user with only the allowed claims.
    fn user(&self, mut claims: Map<String, Value>) -> Result<VerifiedUser, EndUserAuthError> {
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(EndUserAuthError::WrongIssuer);
        }
        let sub = match claims.get("sub") {
            Some(Value::String(sub)) if !sub.is_empty() => sub.clone(),
            _ => {
                return Err(EndUserAuthError::MalformedToken(
                    "its `sub` (the user id) is not a non-empty string".to_string(),
                ));
            }
        };
        if sub.len() > MAX_SUBJECT_BYTES {
            return Err(EndUserAuthError::MalformedToken(format!(
                "its `sub` is longer than {MAX_SUBJECT_BYTES} bytes"
            )));
        }
        let expires_at = match claims.get("exp") {
            Some(Value::Number(exp)) => exp
                .as_u64()
                .or_else(|| exp.as_f64().map(|secs| secs as u64)),
            _ => None,
        }
        .ok_or_else(|| EndUserAuthError::MalformedToken("its `exp` is not a number".into()))?;
        let seconds = |name: &str| match claims.get(name) {
            Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|s| s as u64)),
            _ => None,
        };
        let issued_ms = (seconds("iat").or_else(|| seconds("nbf"))).map(|s| s.saturating_mul(1000));
        let allowed = (self.claims.iter())
            .filter_map(|name| Some((name.clone(), claims.remove(name)?)))
            .collect();
        Ok(VerifiedUser {
            sub,
            claims: allowed,
            expires_at,
            issued_ms,
        })
    }

    /// The key `kid` for `alg`: from the cache, or after a refetch.
    async fn key(&self, kid: &str, alg: Alg) -> Result<Arc<VerifyKey>, EndUserAuthError> {
        let unknown = || EndUserAuthError::UnknownKey {
            kid: clipped(kid),
            alg: alg.name(),
        };
        let (cached, fresh) = self.cached(kid, alg);
        if let Some(key) = cached {
            if fresh {
                return Ok(key);
            }
            // Old keys: refresh them unless a fetch is under way; meanwhile
            // (and if the refresh fails) the known key stands.
            if let Ok(mut last) = self.last_attempt.try_lock()
                && let Err(err) = self.refetch(&mut last).await
            {
                tracing::warn!(url = %self.url, %err, "JWKS refresh failed; the cached keys stay in use");
                return Ok(key);
            }
            return self.cached(kid, alg).0.ok_or_else(unknown);
        }
        let mut last = self.last_attempt.lock().await;
        // Another token's fetch may have brought it while this one waited.
        if let Some(key) = self.cached(kid, alg).0 {
            return Ok(key);
        }
        let fetched = self.refetch(&mut last).await;
        drop(last);
        if let Err(err) = fetched {
            tracing::warn!(url = %self.url, %err, "JWKS fetch failed");
            return Err(err);
        }
        if self.read().fetched_at.is_none() {
            return Err(EndUserAuthError::JwksUnavailable(format!(
                "{} has not been fetched yet; the last attempt failed less than {} s ago",
                self.url,
                REFETCH_INTERVAL.as_secs()
            )));
        }
        self.cached(kid, alg).0.ok_or_else(unknown)
    }

    /// The cached key, and whether the cache is younger than [`MAX_KEY_AGE`].
    fn cached(&self, kid: &str, alg: Alg) -> (Option<Arc<VerifyKey>>, bool) {
        let cache = self.read();
        let key = (cache.keys.get(kid))
            .and_then(|keys| keys.iter().find(|key| key.alg == alg))
            .cloned();
        let fresh = cache
            .fetched_at
            .is_some_and(|at| at.elapsed() < MAX_KEY_AGE);
        (key, fresh)
    }

    /// Fetches the JWKS unless the last attempt was less than
    /// [`REFETCH_INTERVAL`] ago. The caller holds `last_attempt`.
    async fn refetch(&self, last: &mut Option<Instant>) -> Result<(), EndUserAuthError> {
        if last.is_some_and(|at| at.elapsed() < REFETCH_INTERVAL) {
            return Ok(());
        }
        *last = Some(Instant::now());
        let body = fetch::fetch(&self.client, &self.url)
            .await
            .map_err(EndUserAuthError::JwksUnavailable)?;
        let keys = keys::parse_jwks(&body)
            .map_err(|why| EndUserAuthError::JwksUnavailable(format!("{}: {why}", self.url)))?;
        tracing::debug!(url = %self.url, kids = keys.len(), "JWKS fetched");
        *self.cache.write().unwrap_or_else(PoisonError::into_inner) = Cache {
            keys,
            fetched_at: Some(Instant::now()),
        };
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Cache> {
        self.cache.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the last fetch look `ago` old, so a test need not wait out
    /// [`REFETCH_INTERVAL`] or [`MAX_KEY_AGE`].
    #[cfg(test)]
    async fn pretend_fetched(&self, ago: Duration) {
        let then = Instant::now().checked_sub(ago);
        let mut last = self.last_attempt.lock().await;
        *last = last.and(then);
        let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
        cache.fetched_at = cache.fetched_at.and(then);
    }
}

/// What the header must say, read before the library sees the token.
struct Header {
    alg: Alg,
    kid: String,
}

fn read_header(token: &str) -> Result<Header, EndUserAuthError> {
    let malformed = |why: &str| EndUserAuthError::MalformedToken(why.to_string());
    if token.len() > MAX_TOKEN_BYTES {
        return Err(EndUserAuthError::MalformedToken(format!(
            "it is longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed(
            "it is not a signed JWT (three base64url parts separated by dots)",
        ));
    };
    let header = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| malformed("its header is not base64url"))?;
    #[derive(serde::Deserialize)]
    struct Raw {
        alg: String,
        kid: Option<String>,
        crit: Option<Value>,
    }
    let raw: Raw = serde_json::from_slice(&header)
        .map_err(|_| malformed("its header is not a JSON object with an `alg`"))?;
    let alg = Alg::from_header(&raw.alg)
        .ok_or_else(|| EndUserAuthError::UnsupportedAlgorithm(clipped(&raw.alg)))?;
    if raw.crit.is_some() {
        return Err(malformed(
            "its header has critical extensions (`crit`), which are not supported",
        ));
    }
    match raw.kid {
        Some(kid) if !kid.is_empty() => Ok(Header { alg, kid }),
        _ => Err(EndUserAuthError::MissingKeyId),
    }
}

/// A client's string, shortened for an error message.
fn clipped(text: &str) -> String {
    let mut text = text.to_string();
    crate::util::truncate_utf8(&mut text, 64);
    text
}
