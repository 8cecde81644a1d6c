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
/// Most tool names one `approval` list may hold.
pub(crate) const MAX_MCP_APPROVAL_NAMES: usize = 256;
/// `timeout_secs` when it is left out, and its largest value.
pub(crate) const MCP_TIMEOUT_SECS: u64 = 30;
pub(crate) const MCP_TIMEOUT_MAX_SECS: u64 = 300;
/// Longest server name: `<server>__<tool>` must still fit a tool name (64).
pub(crate) const MAX_MCP_SERVER_NAME: usize = 24;

/// `[mcp.<name>]`: one MCP server (Streamable HTTP).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpServerSettings {
    /// The server's MCP endpoint, `https://host/path` (its origin must be in `[outbound] allow`).
    pub url: String,
    /// A secret sent as `Authorization: Bearer <value>`.
    pub bearer_secret: Option<String>,
    /// Extra request headers: a literal value or `{ secret = "NAME" }`.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValue>,
    /// Which tools' calls wait for a human decision.
    #[serde(default)]
    pub approval: Approval,
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
/// out, every tool is gated except those the server annotates `readOnlyHint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Approval {
    #[default]
    #[serde(skip)]
    NotReadOnly,
    Word(ApprovalWord),
    Tools(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ApprovalWord {
    All,
    None,
}

impl Approval {
    /// Whether a call of `tool` (the server's own name) is gated, given
    /// whether the server annotates it read-only.
    pub(crate) fn gates(&self, tool: &str, read_only: bool) -> bool {
        match self {
            Approval::NotReadOnly => !read_only,
            Approval::Word(ApprovalWord::All) => true,
            Approval::Word(ApprovalWord::None) => false,
            Approval::Tools(names) => names.iter().any(|n| n == tool),
        }
    }
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
        self.bearer_secret.as_deref().into_iter().chain(headers)
    }

    fn check(&self, name: &str, allow: &[String]) -> Result<(), String> {
        let invalid = |what: String| format!("`[mcp.{name}]`: {what}");
        if !valid_server_name(name) {
            return Err(invalid(format!(
                "a server name is 1 to {MAX_MCP_SERVER_NAME} letters, digits or -"
            )));
        }
        let uri: http::Uri = (self.url.parse())
            .map_err(|_| invalid(format!("`url` = {:?} is not a URL", self.url)))?;
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
