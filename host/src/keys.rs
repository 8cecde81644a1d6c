//! API keys: minting, hashing, and the in-memory registry the request path checks.
//!
//! A key is `ahp_` (platform) or `ahi_` (invocation), a 16-hex-digit id, `_`,
//! and 256 random bits in hex. Only its SHA-256 is stored; a presented key is
//! looked up by id and its hash compared in constant time. The bootstrap key
//! from `AGENTHOST_BOOTSTRAP_KEY` may be any string: it is stored under the
//! fixed id `bootstrap`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::store::{ApiKeyRecord, KeyClass, now_rfc3339};

pub const BOOTSTRAP_ID: &str = "bootstrap";

/// Who is calling: the verified key.
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: String,
    pub name: String,
    pub class: KeyClass,
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

/// Mints a new key of `class`.
pub fn mint(class: KeyClass, name: &str) -> Minted {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut id);
    rand::rng().fill_bytes(&mut secret);
    let id = hex::encode(id);
    let key = format!("{}_{id}_{}", class_prefix(class), hex::encode(secret));
    let record = record_for(&id, name, class, &key);
    Minted {
        secret: key,
        record,
    }
}

/// The record of a key whose secret the operator chose (the bootstrap key).
pub fn bootstrap_record(key: &str) -> ApiKeyRecord {
    record_for(BOOTSTRAP_ID, "bootstrap", KeyClass::Platform, key)
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
    }
}

struct Entry {
    hash: [u8; 32],
    principal: Principal,
}

/// The verified-key registry: every key's hash, in memory.
#[derive(Clone, Default)]
pub struct Keys {
    inner: Arc<RwLock<HashMap<String, Entry>>>,
}

impl Keys {
    pub fn insert(&self, record: &ApiKeyRecord) {
        let mut hash = [0u8; 32];
        if hex::decode_to_slice(&record.sha256, &mut hash).is_err() {
            tracing::error!(key = %record.id, "stored key hash is malformed; key ignored");
            return;
        }
        let entry = Entry {
            hash,
            principal: Principal {
                key_id: record.id.clone(),
                name: record.name.clone(),
                class: record.class,
            },
        };
        self.inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.id.clone(), entry);
    }

    pub fn has_platform_key(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(|e| e.principal.class == KeyClass::Platform)
    }

    /// The principal of a presented key, or `None` for any unknown,
    /// malformed or wrong key (all the same to the caller).
    pub fn verify(&self, presented: &str) -> Option<Principal> {
        let keys = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        // A bootstrap key may itself look like one of ours: fall back to it.
        let entry = parse_id(presented)
            .and_then(|id| keys.get(id))
            .or_else(|| keys.get(BOOTSTRAP_ID))?;
        constant_time_eq(&entry.hash, &sha256(presented)).then(|| entry.principal.clone())
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
        let minted = mint(KeyClass::Platform, "ci");
        keys.insert(&minted.record);
        assert!(minted.secret.starts_with("ahp_"));
        let principal = keys.verify(&minted.secret).unwrap();
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
    }

    #[test]
    fn bootstrap_key_may_be_any_string() {
        let keys = Keys::default();
        keys.insert(&bootstrap_record("dev-secret"));
        assert_eq!(keys.verify("dev-secret").unwrap().key_id, BOOTSTRAP_ID);
        assert!(keys.verify("dev-secret2").is_none());
        assert!(keys.has_platform_key());
        let shaped = mint(KeyClass::Platform, "x").secret;
        keys.insert(&bootstrap_record(&shaped));
        assert_eq!(keys.verify(&shaped).unwrap().key_id, BOOTSTRAP_ID);
    }
}
