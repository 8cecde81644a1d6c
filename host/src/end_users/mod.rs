//! End users as principals, the people a frontend serves: the tokens that
//! authenticate them (minted by this server, `minted`; JWTs of an app's own
//! identity provider, `jwks`, routed to their app here), and the per-app
//! policy of the manifest's `[end_users]` table. Documented in
//! docs/end-users.md.

mod error;
pub(crate) mod jwks;
pub(crate) mod minted;
pub(crate) mod revocation;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use uuid::Uuid;

pub(crate) use error::EndUserAuthError;
use jwks::{JwksConfig, JwksVerifier};
use minted::MintedTokens;
use revocation::Revocations;

use crate::keys::{EndUser, Principal, Scope};
use crate::secrets::MasterKey;
use crate::store::{Db, EndUsersRecord, StoreError};

/// How often, at most, an unknown issuer and audience make the host look
/// for the app they belong to among the apps' current deployments.
pub(crate) const APP_LOOKUP_INTERVAL: Duration = Duration::from_secs(2);
/// How long a known app's identity provider is trusted before the apps are
/// read again: a redeploy that changes or drops it (on any host) takes
/// effect within this.
pub(crate) const APP_DIRECTORY_MAX_AGE: Duration = Duration::from_secs(30);

/// Why a token could not be authenticated: the token's fault (401), or the
/// store's (503).
#[derive(Debug)]
pub(crate) enum Refusal {
    Token(EndUserAuthError),
    Store(StoreError),
}

impl From<EndUserAuthError> for Refusal {
    fn from(err: EndUserAuthError) -> Self {
        Refusal::Token(err)
    }
}

/// One app's identity provider, as its current deployment names it.
#[derive(Clone, PartialEq)]
struct Provider {
    app: Uuid,
    jwks_url: String,
    issuer: String,
    audience: String,
    claims: Vec<String>,
}

/// Apps by their identity provider's `(issuer, audience)`.
#[derive(Default)]
struct Directory {
    apps: HashMap<(String, String), Provider>,
    /// When the apps were last read (`None`: never).
    read_at: Option<Instant>,
}

/// Authenticates end-user tokens.
pub(crate) struct EndUsers {
    minted: MintedTokens,
    /// The operator's `--allow-insecure-jwks`.
    allow_insecure_jwks: bool,
    directory: tokio::sync::Mutex<Directory>,
    /// One verifier per app (its key cache and refetch limit live in it),
    /// with the provider it was made for.
    verifiers: Mutex<HashMap<Uuid, (Provider, Arc<JwksVerifier>)>>,
    /// Users whose tokens were revoked (`revocation`).
    revocations: Revocations,
}

impl EndUsers {
    pub(crate) fn new(master: &MasterKey, allow_insecure_jwks: bool) -> EndUsers {
        EndUsers {
            minted: MintedTokens::new(master),
            allow_insecure_jwks,
            directory: tokio::sync::Mutex::default(),
            verifiers: Mutex::default(),
            revocations: Revocations::default(),
        }
    }

    /// The revoked users, as this host knows them.
    pub(crate) fn revocations(&self) -> &Revocations {
        &self.revocations
    }

    /// Whether `token` is meant as an end-user token (rather than an API
    /// key): one we minted, or a JWT (three base64url parts).
    pub(crate) fn claims_token(token: &str) -> bool {
        token.starts_with(minted::PREFIX)
            || (token.starts_with("eyJ") && token.split('.').count() == 3)
    }

    /// The principal of a valid end-user token.
    pub(crate) async fn authenticate(&self, token: &str, store: &Db) -> Result<Principal, Refusal> {
        let (principal, issued_ms) = if token.starts_with(minted::PREFIX) {
            let user = self.minted.verify(token)?;
            let issued_ms = Some(user.issued_ms);
            (principal(user.app, user.sub, user.claims), issued_ms)
        } else {
            let (issuer, audiences) = peek(token)?;
            let provider = self.provider(&issuer, &audiences, store).await?;
            let verifier = self.verifier(&provider)?;
            let user = verifier.verify(token).await?;
            let issued_ms = user.issued_ms;
            (principal(provider.app, user.sub, user.claims), issued_ms)
        };
        self.refuse_revoked(&principal.key_id, issued_ms, store)
            .await?;
        Ok(principal)
    }

    /// Refuses a token of end user `user_key` issued at `issued_ms` (Unix
    /// ms; `None`: it does not say) at or before the user's revocation.
    pub(crate) async fn refuse_revoked(
        &self,
        user_key: &str,
        issued_ms: Option<u64>,
        store: &Db,
    ) -> Result<(), Refusal> {
        let revoked = (self.revocations)
            .revoked(user_key, issued_ms, store)
            .await
            .map_err(Refusal::Store)?;
        if !revoked {
            return Ok(());
        }
        let not_before = (self.revocations.not_before(user_key, store).await)
            .map_err(Refusal::Store)?
            .unwrap_or_default();
        Err(Refusal::Token(EndUserAuthError::TokenRevoked(rfc3339_ms(
            not_before,
        ))))
    }

    /// The app whose identity provider issues tokens for `(issuer, audience)`.
    async fn provider(
        &self,
        issuer: &str,
        audiences: &[String],
        store: &Db,
    ) -> Result<Provider, Refusal> {
        let mut directory = self.directory.lock().await;
        if directory
            .read_at
            .is_some_and(|at| at.elapsed() >= APP_DIRECTORY_MAX_AGE)
        {
            directory.apps = read_providers(store).await.map_err(Refusal::Store)?;
            directory.read_at = Some(Instant::now());
        }
        let found = |directory: &Directory| {
            (audiences.iter())
                .find_map(|aud| directory.apps.get(&(issuer.to_string(), aud.clone())))
                .cloned()
        };
        if let Some(provider) = found(&directory) {
            return Ok(provider);
        }
        // Unknown: read the apps again (a deploy, maybe on another host),
        // at most once per interval, so a flood of made-up tokens costs
        // no more than one read per interval.
        let due = directory
            .read_at
            .is_none_or(|at| at.elapsed() >= APP_LOOKUP_INTERVAL);
        if due {
            directory.apps = read_providers(store).await.map_err(Refusal::Store)?;
            directory.read_at = Some(Instant::now());
            if let Some(provider) = found(&directory) {
                return Ok(provider);
            }
        }
        let known_issuer = directory.apps.keys().any(|(iss, _)| iss == issuer);
        Err(Refusal::Token(if known_issuer {
            EndUserAuthError::WrongAudience
        } else {
            EndUserAuthError::WrongIssuer
        }))
    }

    /// The app's verifier, made anew when its provider changed.
    fn verifier(&self, provider: &Provider) -> Result<Arc<JwksVerifier>, EndUserAuthError> {
        let mut verifiers = self
            .verifiers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((made_for, verifier)) = verifiers.get(&provider.app)
            && made_for == provider
        {
            return Ok(verifier.clone());
        }
        let verifier = Arc::new(self.make_verifier(provider)?);
        verifiers.insert(provider.app, (provider.clone(), verifier.clone()));
        Ok(verifier)
    }

    fn make_verifier(&self, provider: &Provider) -> Result<JwksVerifier, EndUserAuthError> {
        // The verifier checks issuer and audience again, exactly.
        let config = JwksConfig {
            jwks_url: provider.jwks_url.clone(),
            issuer: provider.issuer.clone(),
            audience: provider.audience.clone(),
            claims: provider.claims.clone(),
        };
        JwksVerifier::new(config, self.allow_insecure_jwks)
    }

    /// Checks an app's `[end_users]` identity provider at deploy time: the
    /// JWKS URL as a verifier would take it.
    pub(crate) fn check_provider(&self, policy: &EndUsersRecord) -> Result<(), EndUserAuthError> {
        let (Some(url), Some(issuer), Some(audience)) =
            (&policy.jwks_url, &policy.issuer, &policy.audience)
        else {
            return Ok(());
        };
        let config = JwksConfig {
            jwks_url: url.clone(),
            issuer: issuer.clone(),
            audience: audience.clone(),
            claims: policy.claims.clone(),
        };
        JwksVerifier::new(config, self.allow_insecure_jwks).map(drop)
    }

    /// Mints a token for user `sub` of `app`, issued after the user's
    /// revocation `not_before` (Unix ms), if any.
    pub(crate) fn mint(
        &self,
        app: Uuid,
        sub: &str,
        claims: Map<String, Value>,
        ttl: Duration,
        not_before: Option<u64>,
    ) -> (String, String) {
        self.minted.mint(app, sub, claims, ttl, not_before)
    }
}

/// Unix ms as RFC 3339 with milliseconds.
pub(crate) fn rfc3339_ms(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// Every app's identity provider, from its current deployment.
async fn read_providers(store: &Db) -> Result<HashMap<(String, String), Provider>, StoreError> {
    store
        .read(|s| {
            let mut out = HashMap::new();
            let mut shared = Vec::new();
            for app in s.apps()? {
                let Some(current) = app.current_deployment else {
                    continue;
                };
                let Some(policy) = s.deployment(current)?.and_then(|d| d.end_users) else {
                    continue;
                };
                let (Some(url), Some(issuer), Some(audience)) =
                    (policy.jwks_url, policy.issuer, policy.audience)
                else {
                    continue;
                };
                let pair = (issuer.clone(), audience.clone());
                let provider = Provider {
                    app: app.id,
                    jwks_url: url,
                    issuer,
                    audience,
                    claims: policy.claims,
                };
                if out.insert(pair.clone(), provider).is_some() {
                    shared.push(pair);
                }
            }
            // Deploys refuse a pair another app uses; should two apps share
            // one anyway, neither gets the tokens.
            for (issuer, audience) in shared {
                tracing::error!(%issuer, %audience, "two apps share one identity provider and audience: their tokens are refused");
                out.remove(&(issuer, audience));
            }
            Ok(out)
        })
        .await
}

/// The unverified `iss` and `aud` of a JWT: only to find the app whose
/// verifier then checks everything.
fn peek(token: &str) -> Result<(String, Vec<String>), EndUserAuthError> {
    let malformed = || EndUserAuthError::MalformedToken("it is not a JWT".into());
    if token.len() > jwks::MAX_TOKEN_BYTES {
        return Err(malformed());
    }
    let payload = token.split('.').nth(1).ok_or_else(malformed)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| malformed())?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|_| malformed())?;
    let issuer = match claims.get("iss") {
        Some(Value::String(iss)) => iss.clone(),
        _ => return Err(EndUserAuthError::WrongIssuer),
    };
    let audiences = match claims.get("aud") {
        Some(Value::String(aud)) => vec![aud.clone()],
        Some(Value::Array(auds)) => (auds.iter())
            .filter_map(|aud| aud.as_str().map(str::to_string))
            .collect(),
        _ => return Err(EndUserAuthError::WrongAudience),
    };
    Ok((issuer, audiences))
}

fn principal(app: Uuid, id: String, claims: Map<String, Value>) -> Principal {
    let user = EndUser { id, claims };
    Principal {
        key_id: user.key_id(app),
        name: "end user".into(),
        scope: Scope::App(app),
        user: Some(Arc::new(user)),
        source: None,
    }
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
        let v4 = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
        for ok in [
            "5f0c6ad2-8d4b-4d6e-9c1a-2f4e8b9d0a7c",
            "kq3_Vx9-Lm2PzR8tYw4HbN",
            &v4.to_string(),
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
    fn a_jwt_is_routed_by_its_unverified_issuer_and_audience() {
        let payload = URL_SAFE_NO_PAD.encode(r#"{"iss":"https://idp","aud":["a","b"],"sub":"x"}"#);
        let token = format!("eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln");
        assert!(EndUsers::claims_token(&token));
        let (issuer, audiences) = peek(&token).unwrap();
        assert_eq!(
            (issuer.as_str(), audiences),
            ("https://idp", vec!["a".to_string(), "b".to_string()])
        );
        let no_iss = format!(
            "eyJhbGciOiJSUzI1NiJ9.{}.c2ln",
            URL_SAFE_NO_PAD.encode(r#"{"aud":"a"}"#)
        );
        assert_eq!(peek(&no_iss), Err(EndUserAuthError::WrongIssuer));
        assert!(matches!(
            peek("eyJ.%%%.x"),
            Err(EndUserAuthError::MalformedToken(_))
        ));
    }
}
