//! Secrets: encrypted at rest, decrypted into memory, injected into the
//! environment of the agents that declare them.
//!
//! Each value is sealed with XChaCha20-Poly1305 under a key derived from the
//! master key, with a random nonce and the secret's name as associated data
//! (a ciphertext cannot be moved to another name). A copy of the redb file
//! alone reveals no value. The vault keeps the decrypted values in memory so
//! a turn's start costs a map lookup; every change updates it after commit.

mod master;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;

pub(crate) use master::{MasterKey, hmac};

use crate::store::{SecretRecord, now_rfc3339};

/// Largest secret value, in bytes.
pub(crate) const MAX_SECRET_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret `{0}` cannot be decrypted with this master key")]
    Decrypt(String),
    #[error("secret `{0}` cannot be encrypted")]
    Encrypt(String),
}

pub struct Vault {
    cipher: XChaCha20Poly1305,
    values: RwLock<HashMap<String, Arc<str>>>,
    /// See `reloads`.
    reloading: tokio::sync::Mutex<()>,
}

/// `[A-Za-z_][A-Za-z0-9_]{0,127}`, not starting with `SERVICE_` or `AGENTHOST_`
/// (names the platform injects itself).
pub(crate) fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("SERVICE_")
        && !name.starts_with("AGENTHOST_")
}

impl Vault {
    pub fn new(master: &MasterKey) -> Vault {
        let key = master.derive("agenthost secrets v1");
        Vault {
            cipher: XChaCha20Poly1305::new(&key.into()),
            values: RwLock::default(),
            reloading: tokio::sync::Mutex::default(),
        }
    }

    /// Seals `value` as the record of secret `name`.
    pub fn seal(
        &self,
        name: &str,
        value: &str,
        created_at: Option<String>,
    ) -> Result<SecretRecord, SecretError> {
        let mut nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad: name.as_bytes(),
                },
            )
            .map_err(|_| SecretError::Encrypt(name.to_string()))?;
        let now = now_rfc3339();
        Ok(SecretRecord {
            name: name.to_string(),
            nonce: hex::encode(nonce),
            ciphertext: hex::encode(sealed),
            created_at: created_at.unwrap_or_else(|| now.clone()),
            updated_at: now,
        })
    }

    pub(crate) fn open(&self, record: &SecretRecord) -> Result<String, SecretError> {
        let fail = || SecretError::Decrypt(record.name.clone());
        let nonce = hex::decode(&record.nonce).map_err(|_| fail())?;
        let sealed = hex::decode(&record.ciphertext).map_err(|_| fail())?;
        if nonce.len() != 24 {
            return Err(fail());
        }
        let plain = self
            .cipher
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &sealed,
                    aad: record.name.as_bytes(),
                },
            )
            .map_err(|_| fail())?;
        String::from_utf8(plain).map_err(|_| fail())
    }

    /// Loads (decrypts) every stored secret into memory.
    pub fn load(&self, records: &[SecretRecord]) -> Result<(), SecretError> {
        let mut values = HashMap::with_capacity(records.len());
        for record in records {
            values.insert(record.name.clone(), Arc::from(self.open(record)?));
        }
        *self.values.write().unwrap_or_else(PoisonError::into_inner) = values;
        Ok(())
    }

    /// Sets secret `name` from its stored record (`None`: deleted) and
    /// returns its value.
    pub fn apply(
        &self,
        name: &str,
        stored: Option<&SecretRecord>,
    ) -> Result<Option<Arc<str>>, SecretError> {
        let value = stored.map(|record| self.open(record)).transpose()?;
        self.set(name, value.as_deref());
        Ok(value.map(Arc::from))
    }

    /// Serializes the API's reloads of a secret after its commits: each
    /// reads the stored record and sets it while holding this, so the last
    /// set is of the last read, the latest committed value.
    pub fn reloads(&self) -> &tokio::sync::Mutex<()> {
        &self.reloading
    }

    /// After a committed change: the new value, or `None` when deleted.
    pub fn set(&self, name: &str, value: Option<&str>) {
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        match value {
            Some(value) => values.insert(name.to_string(), Arc::from(value)),
            None => values.remove(name),
        };
    }

    /// Every secret's name and value, now.
    pub fn all(&self) -> Vec<(String, Arc<str>)> {
        let values = self.values.read().unwrap_or_else(PoisonError::into_inner);
        (values.iter())
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<str>> {
        self.values
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> Vault {
        let dir = tempfile::tempdir().unwrap();
        Vault::new(&MasterKey::load(Some(&"ab".repeat(32)), dir.path()).unwrap())
    }

    #[test]
    fn sealed_values_open_only_under_their_name_and_key() {
        let vault = vault();
        let record = vault.seal("TOKEN", "s3cret-value", None).unwrap();
        assert!(!record.ciphertext.contains(&hex::encode("s3cret-value")));
        assert_eq!(vault.open(&record).unwrap(), "s3cret-value");
        let moved = SecretRecord {
            name: "OTHER".into(),
            ..record.clone()
        };
        assert!(vault.open(&moved).is_err(), "bound to its name");
        let dir = tempfile::tempdir().unwrap();
        let other = Vault::new(&MasterKey::load(Some(&"cd".repeat(32)), dir.path()).unwrap());
        assert!(other.open(&record).is_err(), "bound to its key");
    }

    #[test]
    fn names_are_environment_variable_style() {
        for ok in ["OPENAI_API_KEY", "_x", "a1"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "SERVICE_X", "AGENTHOST_KEY"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_master_key_is_generated_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let a = MasterKey::load(None, dir.path()).unwrap().derive("x");
        let b = MasterKey::load(None, dir.path()).unwrap().derive("x");
        assert_eq!(a, b);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("master.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
