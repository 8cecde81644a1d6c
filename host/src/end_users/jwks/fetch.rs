//! Fetching an app's JWKS, by the host itself (not through the guests'
//! allowlist): `https` to public addresses only, unless the operator allows
//! insecure JWKS (plain `http`, loopback and private addresses, for local
//! identity providers and tests). A host name is checked when it resolves,
//! and the connection goes to the very addresses that were checked, so a
//! DNS answer cannot change in between. No redirects, no proxy, one timeout
//! for the whole fetch, and a bounded body.

use std::time::Duration;

use reqwest::{Client, Url};

use super::EndUserAuthError;
use crate::net::{PublicOnly, check_public_url};

/// The whole fetch, connecting to the last body byte.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS accepted (an identity provider's is a few KiB).
pub(crate) const MAX_JWKS_BYTES: usize = 256 * 1024;

/// Checks the configured URL: its scheme, no credentials, and an address
/// given literally must be public unless `allow_insecure` (`net`'s rule).
pub(super) fn check_url(raw: &str, allow_insecure: bool) -> Result<Url, EndUserAuthError> {
    check_public_url(raw, allow_insecure, "--allow-insecure-jwks")
        .map_err(EndUserAuthError::InvalidJwksUrl)
}

/// The verifier's own client.
pub(super) fn client(allow_insecure: bool) -> Result<Client, EndUserAuthError> {
    // reqwest is built without a TLS provider of its own (host/Cargo.toml).
    crate::util::install_tls_provider();
    let builder = Client::builder()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .https_only(!allow_insecure)
        .user_agent(concat!("agenthost/", env!("CARGO_PKG_VERSION")));
    let builder = if allow_insecure {
        builder
    } else {
        builder.dns_resolver(PublicOnly {
            flag: "--allow-insecure-jwks",
        })
    };
    builder
        .build()
        .map_err(|err| EndUserAuthError::JwksUnavailable(format!("no HTTP client: {err}")))
}

/// Fetches the JWKS document: a 2xx answer, at most [`MAX_JWKS_BYTES`].
pub(super) async fn fetch(client: &Client, url: &Url) -> Result<Vec<u8>, String> {
    let mut response = (client.get(url.clone()))
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|err| format!("{url}: {}", chain(&err)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("{url} answered {status}"));
    }
    let too_large = || format!("{url} sent more than {MAX_JWKS_BYTES} bytes");
    if (response.content_length()).is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) =
        (response.chunk().await).map_err(|err| format!("{url}: {}", chain(&err)))?
    {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error and its causes, for the log (reqwest's own text is terse).
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
