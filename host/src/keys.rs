//! API keys: minting, hashing, and the in-memory registry the request path checks.
//!
//! A key is `ahp_` (platform) or `ahi_` (invocation), a 16-hex-digit id, `_`,
//! and 256 random bits in hex. Only its SHA-256 is stored; a presented key is
//! looked up by id and its hash compared in constant time. The bootstrap key
//! from `AGENTHOST_BOOTSTRAP_KEY` may be any string of at least
//! `MIN_BOOTSTRAP_LEN` characters: it is stored under the fixed id `bootstrap`.

mod lookup;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::store::{ApiKeyRecord, KeyClass, now_rfc3339};

pub(crate) const BOOTSTRAP_ID: &str = "bootstrap";
/// The shortest bootstrap key `serve` accepts, in characters.
pub(crate) const MIN_BOOTSTRAP_LEN: usize = 16;

/// Refuses a bootstrap key too short to resist guessing.
pub(crate) fn check_bootstrap(key: &str) -> Result<(), String> {
    let length = key.chars().count();
    if length < MIN_BOOTSTRAP_LEN {
        return Err(format!(
            "AGENTHOST_BOOTSTRAP_KEY is {length} characters long: use at least {MIN_BOOTSTRAP_LEN} \
             (a long random string, e.g. `openssl rand -hex 32`)"
        ));
    }
    Ok(())
}

/// What a verified caller may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A platform key: everything.
    Platform,
    /// An invocation key: the session endpoints of one app.
    App(Uuid),
    /// A stream token: the event stream of one session.
    Session(Uuid),
}

/// Who is calling: the verified key (or the key behind a stream token), or
/// an end user of one app (`end_users`).
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    /// The API key's id; for an end user, `user:<app>:<hash of the user id>`
    /// (the namespace of their `Idempotency-Key`s, rate limit and stream tokens).
    pub key_id: String,
    pub name: String,
    pub scope: Scope,
    /// The end user this caller is (scope `App`), authenticated by an
    /// end-user token; `None` for an API key or a stream token.
    pub user: Option<Arc<EndUser>>,
    /// The request's client address (`api::client_addr`), set by
    /// authentication: a bare invocation key's shares are counted by it.
    pub source: Option<std::net::IpAddr>,
}

/// An authenticated end user of one app.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EndUser {
    /// The user id (`sub` of the token).
    pub id: String,
    /// The claims the app lets through (`[end_users] claims`), nothing else.
    pub claims: serde_json::Map<String, serde_json::Value>,
}

pub(crate) use crate::store::END_USER_KEY_PREFIX;

impl EndUser {
    /// The `Principal::key_id` of this user of `app`: fixed length, no `.`
    /// (it goes into stream tokens), and the same on every host.
    pub(crate) fn key_id(&self, app: Uuid) -> String {
        end_user_key(app, &self.id)
    }
}

/// The `Principal::key_id` of end user `user` of `app` (`EndUser::key_id`);
/// the store keys the user's rows by it.
pub(crate) use crate::store::end_user_key;

impl Principal {
    pub(crate) fn is_platform(&self) -> bool {
        self.scope == Scope::Platform
    }

    /// May this caller create sessions of `app` and talk to them?
    pub(crate) fn may_use_app(&self, app: Uuid) -> bool {
        match self.scope {
            Scope::Platform => true,
            Scope::App(own) => own == app,
            Scope::Session(_) => false,
        }
    }

    /// May this caller reach `session` (of `app`, owned by end user
    /// `owner`)? An end user reaches only their own sessions, and a bare
    /// invocation key only sessions no end user owns.
    pub(crate) fn may_use_session(&self, session: Uuid, app: Uuid, owner: Option<&str>) -> bool {
        match self.scope {
            Scope::Platform => true,
            Scope::App(own) => own == app && self.user_id() == owner,
            Scope::Session(own) => own == session,
        }
    }

    /// The end user's id, for an end user.
    pub(crate) fn user_id(&self) -> Option<&str> {
        self.user.as_deref().map(|user| user.id.as_str())
    }

    /// An invocation key with no end user behind it (the key a frontend
    /// ships): what it names must be unguessable.
    pub(crate) fn is_bare_invocation(&self) -> bool {
        matches!(self.scope, Scope::App(_)) && self.user.is_none()
    }
}

/// A freshly minted key: the secret is shown once and never stored.
pub struct Minted {
    pub secret: String,
    pub record: ApiKeyRecord,
}

fn sha256(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn class_prefix(class: KeyClass) -> &'static str {
    match class {
        KeyClass::Platform => "ahp",
        KeyClass::Invocation => "ahi",
    }
}

/// Mints a new key of `class` (an invocation key names its app).
pub fn mint(class: KeyClass, name: &str, app_id: Option<Uuid>) -> Minted {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut id);
    rand::rng().fill_bytes(&mut secret);
    let id = hex::encode(id);
    let key = format!("{}_{id}_{}", class_prefix(class), hex::encode(secret));
    let mut record = record_for(&id, name, class, &key);
    record.app_id = app_id;
    Minted {
        secret: key,
        record,
    }
}

/// The record of a key whose secret the operator chose (the bootstrap key).
pub(crate) fn bootstrap_record(key: &str) -> ApiKeyRecord {
    // Any string may be a bootstrap key: none of it is shown.
    ApiKeyRecord {
        prefix: "(bootstrap)".into(),
        ..record_for(BOOTSTRAP_ID, "bootstrap", KeyClass::Platform, key)
    }
}

fn record_for(id: &str, name: &str, class: KeyClass, key: &str) -> ApiKeyRecord {
    let shown: String = key.chars().take(12).collect();
    ApiKeyRecord {
        id: id.to_string(),
        name: name.to_string(),
        class,
        app_id: None,
        sha256: hex::encode(sha256(key)),
        prefix: shown,
        created_at: now_rfc3339(),
        last_used_at: None,
    }
}

/// How often, at most, a key's last-used time is written.
const TOUCH_EVERY_SECS: u64 = 60;

struct Entry {
    hash: [u8; 32],
    principal: Principal,
    /// Unix seconds of the last last-used write (0: never).
    touched: AtomicU64,
}

/// The verified-key registry: every key's hash, in memory. Revoking a key
/// removes it here at once and tells open streams.
#[derive(Clone)]
pub(crate) struct Keys {
    inner: Arc<RwLock<HashMap<String, Entry>>>,
    revoked: broadcast::Sender<String>,
    /// Unknown ids found absent from the store (`lookup.rs`).
    misses: Arc<lookup::Misses>,
    /// Keys removed so far (changed under `inner`'s write lock): a lookup
    /// that began before a removal does not put its key back.
    removals: Arc<AtomicU64>,
}

impl Default for Keys {
    fn default() -> Self {
        Keys {
            inner: Arc::default(),
            revoked: broadcast::channel(64).0,
            misses: Arc::default(),
            removals: Arc::default(),
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn entry_for(record: &ApiKeyRecord) -> Option<Entry> {
    let mut hash = [0u8; 32];
    if hex::decode_to_slice(&record.sha256, &mut hash).is_err() {
        tracing::error!(key = %record.id, "stored key hash is malformed; key ignored");
        return None;
    }
    let scope = match (record.class, record.app_id) {
        (KeyClass::Platform, _) => Scope::Platform,
        (KeyClass::Invocation, Some(app)) => Scope::App(app),
        (KeyClass::Invocation, None) => {
            tracing::error!(key = %record.id, "invocation key without an app; key ignored");
            return None;
        }
    };
    Some(Entry {
        hash,
        principal: Principal {
            key_id: record.id.clone(),
            name: record.name.clone(),
            scope,
            user: None,
            source: None,
        },
        touched: AtomicU64::new(0),
    })
}

impl Keys {
    pub(crate) fn insert(&self, record: &ApiKeyRecord) {
        let Some(entry) = entry_for(record) else {
            return;
        };
        self.misses.forget(&record.id);
        self.inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.id.clone(), entry);
    }

    /// `insert`, unless a key was removed since `removals` was read (the
    /// record may be of a key revoked meanwhile): whether it was inserted.
    fn insert_unless_removed(&self, record: &ApiKeyRecord, removals: u64) -> bool {
        let Some(entry) = entry_for(record) else {
            return true;
        };
        let mut keys = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if self.removals.load(Ordering::SeqCst) != removals {
            return false;
        }
        keys.insert(record.id.clone(), entry);
        true
    }

    /// Forgets a key at once and ends its open streams.
    pub(crate) fn remove(&self, id: &str) {
        {
            let mut keys = self.inner.write().unwrap_or_else(PoisonError::into_inner);
            keys.remove(id);
            self.removals.fetch_add(1, Ordering::SeqCst);
        }
        // No stream listening is fine.
        let _ = self.revoked.send(id.to_string());
    }

    /// Ends the open streams of `id` (an end user's `key_id`, whose tokens
    /// were revoked; `end_users::revocation`), without forgetting anything.
    pub(crate) fn end_streams(&self, id: &str) {
        // No stream listening is fine.
        let _ = self.revoked.send(id.to_string());
    }

    /// Key ids as they are revoked.
    pub(crate) fn revocations(&self) -> broadcast::Receiver<String> {
        self.revoked.subscribe()
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(id)
    }

    /// The ids of every key held now.
    pub(crate) fn ids(&self) -> Vec<String> {
        let keys = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        keys.keys().cloned().collect()
    }

    /// Whether `id` is an invocation key held now.
    pub(crate) fn is_invocation(&self, id: &str) -> bool {
        let keys = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        keys.get(id)
            .is_some_and(|entry| matches!(entry.principal.scope, Scope::App(_)))
    }

    pub(crate) fn has_platform_key(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(|e| e.principal.scope == Scope::Platform)
    }

    /// The stored SHA-256 of key `id`, while it is held: what a stream
    /// token is bound to, so a token does not outlive a key replaced under
    /// the same id (the bootstrap key).
    pub(crate) fn hash_of(&self, id: &str) -> Option<[u8; 32]> {
        let keys = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        keys.get(id).map(|entry| entry.hash)
    }

    /// The principal of a presented key, or `None` for any unknown,
    /// malformed, revoked or wrong key (all the same to the caller).
    pub(crate) fn verify(&self, presented: &str) -> Option<Principal> {
        let keys = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        // A bootstrap key may itself look like one of ours: fall back to it.
        let entry = parse_id(presented)
            .and_then(|id| keys.get(id))
            .or_else(|| keys.get(BOOTSTRAP_ID))?;
        if !constant_time_eq(&entry.hash, &sha256(presented)) {
            return None;
        }
        Some(entry.principal.clone())
    }

    /// Whether key `id`'s last-used time is due to be written (at most
    /// about once a minute); a true answer claims it. Called only for a
    /// request the key was allowed to make: a refused one is no use.
    pub(crate) fn touch_due(&self, id: &str) -> bool {
        let keys = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = keys.get(id) else {
            return false;
        };
        let now = unix_now();
        let last = entry.touched.load(Ordering::Relaxed);
        now.saturating_sub(last) >= TOUCH_EVERY_SECS
            && entry
                .touched
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// The id part of a key of our format.
fn parse_id(key: &str) -> Option<&str> {
    let mut parts = key.splitn(3, '_');
    let prefix = parts.next()?;
    let id = parts.next()?;
    let secret = parts.next()?;
    let ok = matches!(prefix, "ahp" | "ahi")
        && id.len() == 16
        && secret.len() == 64
        && id
            .chars()
            .chain(secret.chars())
            .all(|c| c.is_ascii_hexdigit());
    ok.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_verify_and_others_do_not() {
        let keys = Keys::default();
        let minted = mint(KeyClass::Platform, "ci", None);
        keys.insert(&minted.record);
        assert!(minted.secret.starts_with("ahp_"));
        let principal = keys.verify(&minted.secret).unwrap();
        assert!(!keys.touch_due("unknown"), "no such key");
        assert!(
            keys.touch_due(&principal.key_id),
            "the first use is recorded"
        );
        assert!(
            !keys.touch_due(&principal.key_id),
            "the next not within a minute"
        );
        assert_eq!(principal.key_id, minted.record.id);
        let mut wrong = minted.secret.clone();
        wrong.pop();
        wrong.push(if minted.secret.ends_with('0') {
            '1'
        } else {
            '0'
        });
        assert!(keys.verify(&wrong).is_none());
        assert!(keys.verify("").is_none());
        assert!(keys.verify("garbage").is_none());
        keys.remove(&minted.record.id);
        assert!(keys.verify(&minted.secret).is_none(), "revoked at once");
    }

    #[test]
    fn bootstrap_key_may_be_any_string() {
        let keys = Keys::default();
        keys.insert(&bootstrap_record("dev-secret"));
        assert_eq!(keys.verify("dev-secret").unwrap().key_id, BOOTSTRAP_ID);
        assert!(keys.verify("dev-secret2").is_none());
        assert!(keys.has_platform_key());
        let shaped = mint(KeyClass::Platform, "x", None).secret;
        keys.insert(&bootstrap_record(&shaped));
        assert_eq!(keys.verify(&shaped).unwrap().key_id, BOOTSTRAP_ID);
    }
}
