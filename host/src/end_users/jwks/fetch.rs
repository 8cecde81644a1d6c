//! Fetching an app's JWKS, by the host itself (not through the guests'
//! allowlist): `https` to public addresses only, unless the operator allows
//! insecure JWKS (plain `http`, loopback and private addresses, for local
//! identity providers and tests). A host name is checked when it resolves,
//! and the connection goes to the very addresses that were checked, so a
//! DNS answer cannot change in between. No redirects, no proxy, one timeout
//! for the whole fetch, and a bounded body.

use std::net::IpAddr;
use std::time::Duration;

use reqwest::{Client, Url};

use super::EndUserAuthError;
use crate::runtime::outbound::non_public_address;
use crate::runtime::outbound::resolve::PublicOnly;

/// The whole fetch, connecting to the last body byte.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS accepted (an identity provider's is a few KiB).
pub(crate) const MAX_JWKS_BYTES: usize = 256 * 1024;

/// Checks the configured URL: its scheme, no credentials, and an address
/// given literally must be public unless `allow_insecure`.
pub(super) fn check_url(raw: &str, allow_insecure: bool) -> Result<Url, EndUserAuthError> {
    let refuse = |why: String| EndUserAuthError::InvalidJwksUrl(why);
    let url = Url::parse(raw).map_err(|err| refuse(format!("{raw:?} is not a URL: {err}")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_insecure => {}
        "http" => {
            return Err(refuse(format!(
                "{raw} is plain http; only https is accepted (the operator's --allow-insecure-jwks allows http)"
            )));
        }
        other => return Err(refuse(format!("{raw}: the scheme {other} is not https"))),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(format!("{raw} carries credentials")));
    }
    let Some(host) = url.host_str() else {
        return Err(refuse(format!("{raw} names no host")));
    };
    // An address given literally (the URL parser normalises its forms; an
    // IPv6 one comes in brackets).
    let literal: Option<IpAddr> = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok();
    if let Some(ip) = literal
        && !allow_insecure
        && let Some(kind) = non_public_address(ip)
    {
        return Err(refuse(format!(
            "{raw} is a {kind} address; the operator's --allow-insecure-jwks allows those"
        )));
    }
    Ok(url)
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
