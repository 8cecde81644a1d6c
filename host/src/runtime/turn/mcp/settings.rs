//! The manifest's `[mcp.<name>]` sections: MCP servers the host calls for
//! the agent (docs/mcp.md, "MCP servers for your agent"), checked at upload
//! (`build::manifest`) and read back from a deployment's stored manifest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::runtime::outbound::OriginPattern;
use crate::runtime::outbound::origin::Origin;

/// Most `[mcp.<name>]` sections one manifest may declare.
pub(crate) const MAX_MCP_SERVERS: usize = 8;
/// Most headers one server's `headers` may set.
pub(crate) const MAX_MCP_HEADERS: usize = 16;
/// Most tool names one `approval` (or `ungated`) list may hold.
pub(crate) const MAX_MCP_APPROVAL_NAMES: usize = 256;
/// Most `{secret:NAME}` placeholders one `url` may hold.
pub(crate) const MAX_MCP_URL_SECRETS: usize = 4;
/// `timeout_secs` when it is left out, and its largest value.
pub(crate) const MCP_TIMEOUT_SECS: u64 = 30;
pub(crate) const MCP_TIMEOUT_MAX_SECS: u64 = 300;
/// Longest server name: `<server>__<tool>` must still fit a tool name (64).
pub(crate) const MAX_MCP_SERVER_NAME: usize = 24;

/// `[mcp.<name>]`: one MCP server (Streamable HTTP).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpServerSettings {
    /// The server's MCP endpoint, `https://host/path` (its origin must be in
    /// `[outbound] allow`); its path may hold `{secret:NAME}` placeholders,
    /// each replaced by that secret's value at each turn.
    pub url: String,
    /// A secret sent as `Authorization: Bearer <value>`.
    pub bearer_secret: Option<String>,
    /// Extra request headers: a literal value or `{ secret = "NAME" }`.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValue>,
    /// Which tools' calls wait for a human decision.
    #[serde(default)]
    pub approval: Approval,
    /// With `approval` left out: the tools whose calls run without a decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ungated: Vec<String>,
    /// With `approval` left out: the tools the server annotates
    /// `readOnlyHint` run without a decision too (the server is trusted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trust_annotations: bool,
    /// How long one call (with its connection and session set-up) may take.
    pub timeout_secs: Option<u64>,
}

/// A header's value: literal text, or a secret's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum HeaderValue {
    Text(String),
    Secret { secret: String },
}

/// `approval`: `"all"`, `"none"`, or a list of the server's tool names. Left
/// out, every tool is gated except those `ungated` lists and, with
/// `trust_annotations = true`, those the server annotates `readOnlyHint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Approval {
    #[default]
    #[serde(skip)]
    Default,
    Word(ApprovalWord),
    Tools(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ApprovalWord {
    All,
    None,
}

/// Whether `host` is a loopback host name or address.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// One part of a `url`: literal text, or a `{secret:NAME}` placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UrlPart<'a> {
    Text(&'a str),
    Secret(&'a str),
}

/// `url` cut into its literal text and `{secret:NAME}` placeholders (an
/// unclosed `{secret:` is literal text, which no URL parses).
pub(crate) fn url_parts(url: &str) -> Vec<UrlPart<'_>> {
    const OPEN: &str = "{secret:";
    let mut parts = Vec::new();
    let mut rest = url;
    while let Some(at) = rest.find(OPEN) {
        let Some(len) = rest[at + OPEN.len()..].find('}') else {
            break;
        };
        if at > 0 {
            parts.push(UrlPart::Text(&rest[..at]));
        }
        parts.push(UrlPart::Secret(
            &rest[at + OPEN.len()..at + OPEN.len() + len],
        ));
        rest = &rest[at + OPEN.len() + len + 1..];
    }
    if !rest.is_empty() {
        parts.push(UrlPart::Text(rest));
    }
    parts
}

/// Whether a secret's value may stand for a `{secret:NAME}` placeholder:
/// long enough to be redacted, and only characters a path segment keeps
/// as they are (so the journaled path shows it as the redactor sees it).
pub(crate) fn fits_a_url(value: &str) -> bool {
    value.len() >= crate::redact::MIN_REDACTED
        && (value.bytes()).all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// Whether `name` may name an MCP server: 1 to 24 letters, digits or `-`.
pub(crate) fn valid_server_name(name: &str) -> bool {
    (1..=MAX_MCP_SERVER_NAME).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl McpServerSettings {
    /// The call timeout in seconds.
    pub(crate) fn timeout_secs(&self) -> u64 {
        self.timeout_secs.unwrap_or(MCP_TIMEOUT_SECS)
    }

    /// The secrets this server's settings name.
    pub(crate) fn secret_names(&self) -> impl Iterator<Item = &str> {
        let headers = self.headers.values().filter_map(|v| match v {
            HeaderValue::Secret { secret } => Some(secret.as_str()),
            HeaderValue::Text(_) => None,
        });
        let url = url_parts(&self.url).into_iter().filter_map(|p| match p {
            UrlPart::Secret(name) => Some(name),
            UrlPart::Text(_) => None,
        });
        self.bearer_secret
            .as_deref()
            .into_iter()
            .chain(headers)
            .chain(url)
    }

    /// Whether a call of `tool` (the server's own name) is gated, given
    /// whether the server annotates it read-only (an annotation counts only
    /// with `trust_annotations`).
    pub(crate) fn gates(&self, tool: &str, read_only: bool) -> bool {
        match &self.approval {
            Approval::Default => {
                let ungated = self.ungated.iter().any(|n| n == tool);
                !(ungated || (self.trust_annotations && read_only))
            }
            Approval::Word(ApprovalWord::All) => true,
            Approval::Word(ApprovalWord::None) => false,
            Approval::Tools(names) => names.iter().any(|n| n == tool),
        }
    }

    /// Whether the manifest names `tool` as gated (in an `approval` list):
    /// its calls wait for a decision even when the server's tools cannot
    /// be listed.
    pub(crate) fn names_gated(&self, tool: &str) -> bool {
        matches!(&self.approval, Approval::Tools(names) if names.iter().any(|n| n == tool))
    }

    fn check(&self, name: &str, allow: &[String]) -> Result<(), String> {
        let invalid = |what: String| format!("`[mcp.{name}]`: {what}");
        if !valid_server_name(name) {
            return Err(invalid(format!(
                "a server name is 1 to {MAX_MCP_SERVER_NAME} letters, digits or -"
            )));
        }
        // Placeholders stand in the path only: the origin is checked as written.
        let parts = url_parts(&self.url);
        let placeholders = parts.iter().filter(|p| matches!(p, UrlPart::Secret(_)));
        if placeholders.count() > MAX_MCP_URL_SECRETS {
            return Err(invalid(format!(
                "`url` holds more than {MAX_MCP_URL_SECRETS} `{{secret:NAME}}` placeholders"
            )));
        }
        let example: String = (parts.iter())
            .map(|p| match p {
                UrlPart::Text(text) => *text,
                UrlPart::Secret(_) => "secret",
            })
            .collect();
        let uri: http::Uri = (example.parse())
            .map_err(|_| invalid(format!("`url` = {:?} is not a URL", self.url)))?;
        let in_path = |at: usize| {
            (self.url[..at].split_once("://")).is_some_and(|(_, rest)| rest.contains('/'))
        };
        if parts.iter().any(|p| matches!(p, UrlPart::Secret(_)))
            && !self.url.find("{secret:").is_some_and(in_path)
        {
            return Err(invalid(
                "`url`: a `{secret:NAME}` placeholder may stand in the path only".into(),
            ));
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(invalid(
                "`url` must not carry credentials (put them in `bearer_secret` or `headers`)"
                    .into(),
            ));
        }
        let origin = Origin::of(&uri).ok_or_else(|| {
            invalid(format!(
                "`url` = {:?}: use an http:// or https:// URL",
                self.url
            ))
        })?;
        if uri.query().is_some() {
            return Err(invalid(
                "`url` must not carry a query string (put credentials in `bearer_secret` or `headers`)"
                    .into(),
            ));
        }
        let declared = allow.iter().filter_map(|a| OriginPattern::parse(a).ok());
        if !declared.into_iter().any(|p| p.matches(&origin)) {
            return Err(invalid(format!(
                "the origin of `url` ({origin}) is not in `[outbound] allow`: add it there"
            )));
        }
        if let Some(bad) = self.secret_names().find(|n| !crate::secrets::valid_name(n)) {
            return Err(invalid(format!(
                "`{bad}` is not a secret name (letters, digits and _, not starting with a digit, SERVICE_ or AGENTHOST_)"
            )));
        }
        if origin.scheme == crate::runtime::outbound::origin::Scheme::Http
            && !is_loopback(&origin.host)
            && let Some(secret) = self.secret_names().next()
        {
            return Err(invalid(format!(
                "secret `{secret}` would be sent in clear over http:// to {origin}: use https:// (http:// only to a loopback origin)"
            )));
        }
        if self.headers.len() > MAX_MCP_HEADERS {
            return Err(invalid(format!(
                "`headers` sets more than {MAX_MCP_HEADERS} headers"
            )));
        }
        for (header, value) in &self.headers {
            let lower = header.to_ascii_lowercase();
            if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(invalid(format!(
                    "`headers`: {header:?} is not a header name"
                )));
            }
            let reserved = [
                "host",
                "content-length",
                "content-type",
                "accept",
                "transfer-encoding",
                "connection",
                "mcp-session-id",
                "mcp-protocol-version",
            ];
            if reserved.contains(&lower.as_str()) {
                return Err(invalid(format!(
                    "`headers`: the host sets {header:?} itself"
                )));
            }
            if lower == "authorization" && self.bearer_secret.is_some() {
                return Err(invalid(
                    "`headers` sets Authorization and `bearer_secret` is set too: use one".into(),
                ));
            }
            if let HeaderValue::Text(text) = value
                && http::HeaderValue::from_str(text).is_err()
            {
                return Err(invalid(format!(
                    "`headers`: the value of {header:?} is not a header value"
                )));
            }
        }
        if let Approval::Tools(names) = &self.approval {
            if names.len() > MAX_MCP_APPROVAL_NAMES {
                return Err(invalid(format!(
                    "`approval` lists more than {MAX_MCP_APPROVAL_NAMES} tools"
                )));
            }
            if let Some(bad) = names.iter().find(|n| n.is_empty() || n.len() > 128) {
                return Err(invalid(format!("`approval`: {bad:?} is not a tool name")));
            }
        }
        if self.approval != Approval::Default
            && (self.trust_annotations || !self.ungated.is_empty())
        {
            return Err(invalid(
                "`ungated` and `trust_annotations` apply only when `approval` is left out: use one way"
                    .into(),
            ));
        }
        if self.ungated.len() > MAX_MCP_APPROVAL_NAMES {
            return Err(invalid(format!(
                "`ungated` lists more than {MAX_MCP_APPROVAL_NAMES} tools"
            )));
        }
        if let Some(bad) = (self.ungated.iter()).find(|n| n.is_empty() || n.len() > 128) {
            return Err(invalid(format!("`ungated`: {bad:?} is not a tool name")));
        }
        if let Some(secs) = self.timeout_secs
            && (secs == 0 || secs > MCP_TIMEOUT_MAX_SECS)
        {
            return Err(invalid(format!(
                "`timeout_secs` = {secs}: use 1 to {MCP_TIMEOUT_MAX_SECS}"
            )));
        }
        Ok(())
    }
}

/// Checks every `[mcp.<name>]` section against the manifest's allowlist.
pub(crate) fn check(
    servers: &BTreeMap<String, McpServerSettings>,
    allow: &[String],
) -> Result<(), String> {
    if servers.len() > MAX_MCP_SERVERS {
        return Err(format!(
            "more than {MAX_MCP_SERVERS} `[mcp.<name>]` servers"
        ));
    }
    for (name, settings) in servers {
        settings.check(name, allow)?;
    }
    Ok(())
}

/// Only the `[mcp]` tables of a manifest (the rest was checked at upload).
#[derive(Deserialize)]
struct McpOnly {
    #[serde(default)]
    mcp: BTreeMap<String, McpServerSettings>,
}

/// The `[mcp.<name>]` servers of a stored manifest (none if it no longer parses).
pub(crate) fn read(manifest: &str) -> BTreeMap<String, McpServerSettings> {
    toml::from_str::<McpOnly>(manifest)
        .map(|m| m.mcp)
        .unwrap_or_default()
}
