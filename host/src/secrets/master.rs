//! The master key: from `AGENTHOST_MASTER_KEY` (64 hex digits), or generated
//! into `<data-dir>/master.key` (mode 0600) on first start. Sub-keys for each
//! purpose are derived from it with HMAC-SHA256, so one secret protects all.

use std::path::Path;

use anyhow::{Context, bail};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

pub struct MasterKey([u8; 32]);

impl MasterKey {
    /// The configured key, else the one in the data dir, else a new one saved there.
    pub fn load(configured: Option<&str>, data_dir: &Path) -> anyhow::Result<MasterKey> {
        if let Some(hex_key) = configured.map(str::trim).filter(|k| !k.is_empty()) {
            return parse(hex_key).context("AGENTHOST_MASTER_KEY must be 64 hex digits");
        }
        let path = data_dir.join("master.key");
        match std::fs::read_to_string(&path) {
            Ok(saved) => parse(saved.trim())
                .with_context(|| format!("{} must hold 64 hex digits", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                rand::rng().fill_bytes(&mut key);
                crate::util::write_secret_file(&path, &hex::encode(key))?;
                tracing::info!(path = %path.display(), "generated a master key");
                Ok(MasterKey(key))
            }
            Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// A 32-byte key for one purpose (`label`), independent of the others.
    pub fn derive(&self, label: &str) -> [u8; 32] {
        hmac(&self.0, label.as_bytes())
            .finalize()
            .into_bytes()
            .into()
    }
}

/// HMAC-SHA256 of `body` under `key`, to finish or verify: the one place
/// the derived keys (stream tokens, end-user tokens) sign with.
pub(crate) fn hmac(key: &[u8], body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(body);
    mac
}

fn parse(hex_key: &str) -> anyhow::Result<MasterKey> {
    let mut key = [0u8; 32];
    if hex_key.len() != 64 {
        bail!("expected 64 hex digits, found {}", hex_key.len());
    }
    hex::decode_to_slice(hex_key, &mut key)?;
    Ok(MasterKey(key))
}
