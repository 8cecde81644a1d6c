//! The host's network rule, below everything that reaches out (guests'
//! outbound HTTP in `runtime`, the JWKS fetch in `end_users`, webhook
//! deliveries in `webhooks`): which addresses are public (`ip.rs`), a
//! resolver that gives public addresses only (`resolve.rs`), and the one
//! check of a configured URL (`check_public_url`).

mod ip;
mod resolve;

use std::net::IpAddr;

use reqwest::Url;

pub(crate) use resolve::PublicOnly;

/// Why an address is not public (loopback, private, link-local, ...), or
/// `None`: the one address check.
pub(crate) fn non_public_address(addr: IpAddr) -> Option<&'static str> {
    ip::non_public(addr)
}

/// Checks a URL the host itself will call (a JWKS, a webhook endpoint):
/// `https` (or `http` when `allow_private`), no credentials, and an address
/// given literally must be public unless `allow_private`. A host name is
/// checked when it resolves (`PublicOnly`). A refusal names `flag`, the
/// operator's way to allow plain `http` and non-public addresses.
pub(crate) fn check_public_url(raw: &str, allow_private: bool, flag: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|err| format!("{raw:?} is not a URL: {err}"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => {
            return Err(format!(
                "{raw} is plain http; only https is accepted (the operator's {flag} allows http)"
            ));
        }
        other => return Err(format!("{raw}: the scheme {other} is not https")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{raw} carries credentials"));
    }
    let Some(host) = url.host_str() else {
        return Err(format!("{raw} names no host"));
    };
    // An address given literally (the URL parser normalises its forms; an
    // IPv6 one comes in brackets).
    let literal: Option<IpAddr> = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok();
    if let Some(ip) = literal
        && !allow_private
        && let Some(kind) = non_public_address(ip)
    {
        return Err(format!(
            "{raw} is a {kind} address; the operator's {flag} allows those"
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_https_to_a_public_address_unless_allowed() {
        let flag = "--allow-x";
        assert!(check_public_url("https://example.com/a", false, flag).is_ok());
        assert!(check_public_url("http://example.com/a", true, flag).is_ok());
        assert!(check_public_url("https://127.0.0.1/a", true, flag).is_ok());
        for (url, why) in [
            ("http://example.com/a", "plain http"),
            ("ftp://example.com/a", "the scheme ftp"),
            ("https://u:p@example.com/a", "credentials"),
            ("https://127.0.0.1/a", "loopback"),
            ("https://[::1]/a", "loopback"),
            ("https://10.0.0.1/a", "private"),
            ("not a url", "is not a URL"),
        ] {
            let refused = check_public_url(url, false, flag).expect_err(url);
            assert!(refused.contains(why), "{url}: {refused}");
        }
        let refused = check_public_url("https://10.0.0.1/a", false, flag).expect_err("private");
        assert!(refused.contains(flag), "{refused}");
    }
}
