//! Origin patterns (`https://api.openai.com`, `https://*.example.com:*`):
//! parsing, matching a request's origin, and intersecting a deployment's
//! declaration with the operator's ceiling. Syntax in docs/outbound.md.

use std::fmt;

/// Where a pattern lets a guest connect: a scheme, a host and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OriginPattern {
    pub scheme: Scheme,
    pub host: HostPattern,
    pub port: PortPattern,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Any host (`*`).
    Any,
    /// Every subdomain of the suffix, not the suffix itself (`*.example.com`).
    Subdomains(String),
    /// Exactly this host name or IP literal (IPv6 without brackets).
    Exact(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortPattern {
    Any,
    Exact(u16),
}

/// A request's origin, normalized (lowercase host, explicit port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
}

impl Scheme {
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

impl OriginPattern {
    /// Parses `scheme://host[:port]`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<OriginPattern, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("`{text}` is not an origin: write scheme://host[:port]"))?;
        let scheme = match scheme {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(format!("`{text}`: scheme `{other}` is not http or https")),
        };
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) || rest.trim() != rest {
            return Err(format!(
                "`{text}` is not an origin: no path, query, user or spaces; write scheme://host[:port]"
            ));
        }
        let (host, port) = split_host_port(rest)
            .ok_or_else(|| format!("`{text}`: cannot tell its host from its port"))?;
        let port = match port {
            None => PortPattern::Exact(scheme.default_port()),
            Some("*") => PortPattern::Any,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => PortPattern::Exact(port),
                _ => return Err(format!("`{text}`: port `{port}` is not 1 to 65535 or *")),
            },
        };
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            if !valid_host(suffix) {
                return Err(format!("`{text}`: `{suffix}` is not a host name"));
            }
            HostPattern::Subdomains(suffix.to_string())
        } else if valid_host(&host) || host.parse::<std::net::Ipv6Addr>().is_ok() {
            HostPattern::Exact(host)
        } else {
            return Err(format!(
                "`{text}`: `{host}` is not a host name, an IP address, `*` or `*.<domain>`"
            ));
        };
        Ok(OriginPattern { scheme, host, port })
    }

    pub fn matches(&self, origin: &Origin) -> bool {
        self.scheme == origin.scheme
            && match self.port {
                PortPattern::Any => true,
                PortPattern::Exact(port) => port == origin.port,
            }
            && match &self.host {
                HostPattern::Any => true,
                HostPattern::Exact(host) => *host == origin.host,
                HostPattern::Subdomains(suffix) => is_subdomain(&origin.host, suffix),
            }
    }

    /// The origins both patterns allow, as one pattern (`None` if none).
    pub fn intersect(&self, other: &OriginPattern) -> Option<OriginPattern> {
        if self.scheme != other.scheme {
            return None;
        }
        let port = match (self.port, other.port) {
            (PortPattern::Any, p) | (p, PortPattern::Any) => p,
            (PortPattern::Exact(a), PortPattern::Exact(b)) if a == b => PortPattern::Exact(a),
            _ => return None,
        };
        use HostPattern::*;
        let host = match (&self.host, &other.host) {
            (Any, h) | (h, Any) => h.clone(),
            (Exact(a), Exact(b)) => (a == b).then(|| Exact(a.clone()))?,
            (Exact(a), Subdomains(s)) | (Subdomains(s), Exact(a)) => {
                is_subdomain(a, s).then(|| Exact(a.clone()))?
            }
            (Subdomains(a), Subdomains(b)) => {
                if a == b || is_subdomain(a, b) {
                    Subdomains(a.clone())
                } else if is_subdomain(b, a) {
                    Subdomains(b.clone())
                } else {
                    return None;
                }
            }
        };
        Some(OriginPattern {
            scheme: self.scheme,
            host,
            port,
        })
    }
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        match &self.host {
            HostPattern::Any => write!(f, "*")?,
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}")?,
            HostPattern::Exact(host) if host.contains(':') => write!(f, "[{host}]")?,
            HostPattern::Exact(host) => write!(f, "{host}")?,
        }
        match self.port {
            PortPattern::Any => write!(f, ":*"),
            PortPattern::Exact(port) if port == self.scheme.default_port() => Ok(()),
            PortPattern::Exact(port) => write!(f, ":{port}"),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            write!(f, "{}", self.host)?;
        }
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl Origin {
    /// The origin of an absolute `http`/`https` URI.
    pub fn of(uri: &http::Uri) -> Option<Origin> {
        let scheme = match uri.scheme_str()? {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return None,
        };
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some(Origin {
            scheme,
            host: host.trim_end_matches('.').to_ascii_lowercase(),
            port: uri.port_u16().unwrap_or(scheme.default_port()),
        })
    }
}

/// The effective allowlist: every origin both the declaration and the ceiling allow.
pub(crate) fn effective(
    declared: &[OriginPattern],
    ceiling: &[OriginPattern],
) -> Vec<OriginPattern> {
    let mut out: Vec<OriginPattern> = Vec::new();
    for d in declared {
        for c in ceiling {
            if let Some(both) = d.intersect(c)
                && !out.contains(&both)
            {
                out.push(both);
            }
        }
    }
    out
}

/// The ceiling that allows everything (the server's default).
pub(crate) fn unrestricted() -> Vec<OriginPattern> {
    [Scheme::Http, Scheme::Https]
        .into_iter()
        .map(|scheme| OriginPattern {
            scheme,
            host: HostPattern::Any,
            port: PortPattern::Any,
        })
        .collect()
}

fn is_subdomain(host: &str, suffix: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

fn split_host_port(rest: &str) -> Option<(&str, Option<&str>)> {
    if let Some(inner) = rest.strip_prefix('[') {
        let (host, after) = inner.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match rest.split_once(':') {
        None => Some((rest, None)),
        Some((host, port)) if !port.contains(':') => Some((host, Some(port))),
        Some(_) => None,
    }
}

fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> OriginPattern {
        OriginPattern::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn o(uri: &str) -> Origin {
        Origin::of(&uri.parse().unwrap()).unwrap()
    }

    #[test]
    fn parses_and_prints_back() {
        for text in [
            "https://api.openai.com",
            "http://127.0.0.1:8080",
            "https://*.example.com",
            "https://*:*",
            "http://[::1]:9000",
        ] {
            assert_eq!(p(text).to_string(), text);
        }
        assert_eq!(
            p("https://API.OpenAI.com:443").to_string(),
            "https://api.openai.com"
        );
    }

    #[test]
    fn refuses_what_is_not_an_origin() {
        for text in [
            "api.openai.com",
            "ftp://x.com",
            "https://x.com/v1",
            "https://x.com:0",
            "https://x.com:99999",
            "https://user@x.com",
            "https://",
            "https://*x.com",
            "https://x..com",
            "https://x.com?q",
        ] {
            assert!(OriginPattern::parse(text).is_err(), "{text} parsed");
        }
    }

    #[test]
    fn matches_scheme_host_and_port() {
        assert!(p("https://api.openai.com").matches(&o("https://api.openai.com/v1/chat")));
        assert!(!p("https://api.openai.com").matches(&o("http://api.openai.com/")));
        assert!(!p("https://api.openai.com").matches(&o("https://api.openai.com:8443/")));
        assert!(!p("https://api.openai.com").matches(&o("https://api.openai.com.evil.io/")));
        assert!(p("https://*.example.com").matches(&o("https://a.b.example.com/")));
        assert!(!p("https://*.example.com").matches(&o("https://example.com/")));
        assert!(!p("https://*.example.com").matches(&o("https://badexample.com/")));
        assert!(p("http://127.0.0.1:*").matches(&o("http://127.0.0.1:5555/x")));
        assert!(p("http://[::1]:9000").matches(&o("http://[::1]:9000/")));
    }

    #[test]
    fn intersects_declaration_with_ceiling() {
        let declared = [
            p("https://*.example.com"),
            p("https://api.openai.com"),
            p("http://10.0.0.1:*"),
        ];
        assert_eq!(effective(&declared, &unrestricted()), declared.to_vec());
        let ceiling = [p("https://api.example.com"), p("https://*.openai.com")];
        let got: Vec<String> = effective(&declared, &ceiling)
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(got, ["https://api.example.com", "https://api.openai.com"]);
        assert_eq!(
            effective(&declared, &[p("http://*:8080")]),
            [p("http://10.0.0.1:8080")]
        );
        assert!(effective(&declared, &[p("http://*.org:*")]).is_empty());
        assert_eq!(
            p("https://*.a.example.com").intersect(&p("https://*.example.com")),
            Some(p("https://*.a.example.com"))
        );
    }
}
