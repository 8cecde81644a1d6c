//! Webhooks, the host's side: endpoints' URLs checked, secrets made and
//! sealed (`sign.rs`), decision links (`links.rs`), and the sender
//! (`send.rs`), which claims due deliveries (one host at a time: a lease in
//! the row), signs and posts them through the operator's address rule, and
//! records each attempt with its next time (exponential backoff with
//! jitter, for up to 24 hours). The deliveries themselves are written by the
//! writer in the commit of the event behind them (`store::domain::webhooks`).
//! Documented in docs/webhooks.md.

pub(crate) mod links;
mod send;
pub(crate) mod sign;

use std::time::Duration;

use crate::secrets::{SecretError, Vault};
use crate::store::SecretRecord;

pub(crate) use send::{Sender, start};

/// The operator's webhook settings (`serve` flags).
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Let endpoints be plain `http` on loopback and private addresses
    /// (`--allow-private-webhooks`).
    pub allow_private: bool,
    /// The first retry's delay; each next one doubles (`--webhook-retry-base`).
    pub retry_base: Duration,
    /// Where decision links point (`--public-url`); the listening address when unset.
    pub public_url: Option<String>,
    /// How long a decision link decides after its event (`--decision-link-ttl`).
    pub link_ttl: Duration,
}

/// The longest URL an endpoint may have.
pub(crate) const MAX_URL_LEN: usize = 2048;

/// Checks an endpoint's URL: `https` (or `http` with
/// `--allow-private-webhooks`), no credentials, and an address given
/// literally public unless private ones are allowed. Names are checked
/// again when they resolve, at each delivery.
pub(crate) fn check_url(raw: &str, allow_private: bool) -> Result<reqwest::Url, String> {
    if raw.len() > MAX_URL_LEN {
        return Err(format!("the URL is longer than {MAX_URL_LEN} bytes"));
    }
    crate::net::check_public_url(raw, allow_private, "--allow-private-webhooks")
}

/// The name a webhook's secret is sealed under (the vault binds it in).
fn sealed_name(webhook: uuid::Uuid) -> String {
    format!("webhook:{webhook}")
}

/// Seals a signing secret of `webhook`.
pub(crate) fn seal(
    vault: &Vault,
    webhook: uuid::Uuid,
    secret: &str,
) -> Result<SecretRecord, SecretError> {
    vault.seal(&sealed_name(webhook), secret, None)
}

/// Opens a signing secret of `webhook`.
pub(crate) fn open(
    vault: &Vault,
    webhook: uuid::Uuid,
    sealed: &SecretRecord,
) -> Result<String, SecretError> {
    if sealed.name != sealed_name(webhook) {
        return Err(SecretError::Decrypt(sealed.name.clone()));
    }
    vault.open(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert!(check_url("https://example.com/hook", false).is_ok());
        assert!(check_url("http://example.com/hook", false).is_err());
        assert!(check_url("http://127.0.0.1:9/hook", true).is_ok());
        assert!(check_url("https://127.0.0.1/hook", false).is_err());
        assert!(check_url("https://[::1]/hook", false).is_err());
        assert!(check_url("https://10.0.0.1/hook", false).is_err());
        assert!(check_url("https://user:pw@example.com/", false).is_err());
        assert!(check_url("ftp://example.com/", true).is_err());
        assert!(check_url("not a url", true).is_err());
    }
}
