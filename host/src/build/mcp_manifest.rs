//! The manifest's `[mcp.<name>]` sections: MCP servers the host calls for
//! the agent (docs/mcp.md, "MCP servers for your agent"), checked at upload.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::manifest::ManifestError;
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

    fn check(&self, name: &str, allow: &[String]) -> Result<(), ManifestError> {
        let invalid = |what: String| ManifestError::Invalid(format!("`[mcp.{name}]`: {what}"));
        if !valid_server_name(name) {
            return Err(invalid(format!(
                "a server name is 1 to {MAX_MCP_SERVER_NAME} letters, digits or -"
            )));
        }
        let uri: http::Uri = (self.url.parse())
            .map_err(|_| invalid(format!("`url` = {:?} is not a URL", self.url)))?;
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
) -> Result<(), ManifestError> {
    if servers.len() > MAX_MCP_SERVERS {
        return Err(ManifestError::Invalid(format!(
            "more than {MAX_MCP_SERVERS} `[mcp.<name>]` servers"
        )));
    }
    for (name, settings) in servers {
        settings.check(name, allow)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::build::manifest::Manifest;

    use super::*;

    const BASE: &str = "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[outbound]\nallow = [\"https://mcp.example.com\"]\n";

    #[test]
    fn reads_a_server_and_its_approval_rules() {
        let m = Manifest::parse(&format!(
            "{BASE}[mcp.docs]\nurl = \"https://mcp.example.com/mcp\"\nbearer_secret = \"DOCS_TOKEN\"\nheaders = {{ \"X-Tenant\" = \"acme\", \"X-Key\" = {{ secret = \"DOCS_KEY\" }} }}\napproval = [\"write\"]\ntimeout_secs = 5\n[mcp.ro]\nurl = \"https://mcp.example.com/ro\"\napproval = \"none\"\n[mcp.def]\nurl = \"https://mcp.example.com/d\"\n"
        ))
        .unwrap();
        let docs = &m.mcp["docs"];
        assert_eq!(docs.timeout_secs(), 5);
        let secrets: Vec<_> = docs.secret_names().collect();
        assert_eq!(secrets, ["DOCS_TOKEN", "DOCS_KEY"]);
        assert!(docs.approval.gates("write", true));
        assert!(!docs.approval.gates("read", false));
        assert!(!m.mcp["ro"].approval.gates("write", false));
        let default = &m.mcp["def"].approval;
        assert_eq!(*default, Approval::NotReadOnly);
        assert!(default.gates("write", false) && !default.gates("read", true));
        assert_eq!(m.mcp["def"].timeout_secs(), MCP_TIMEOUT_SECS);
    }

    #[test]
    fn refuses_what_cannot_work_with_a_clear_error() {
        for (bad, needle) in [
            (
                "[mcp.x]\nurl = \"https://elsewhere.example.com/mcp\"\n",
                "not in `[outbound] allow`",
            ),
            ("[mcp.x]\nurl = \"ftp://mcp.example.com/\"\n", "http://"),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m?key=1\"\n",
                "query string",
            ),
            (
                "[mcp.\"a_b\"]\nurl = \"https://mcp.example.com/m\"\n",
                "server name",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nbearer_secret = \"1bad\"\n",
                "secret name",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nheaders = { \"Mcp-Session-Id\" = \"s\" }\n",
                "sets \"Mcp-Session-Id\" itself",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nbearer_secret = \"T\"\nheaders = { Authorization = \"x\" }\n",
                "use one",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\napproval = \"some\"\n",
                "approval",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\ntimeout_secs = 0\n",
                "timeout_secs",
            ),
            (
                "[mcp.x]\nurl = \"https://mcp.example.com/m\"\nretries = 3\n",
                "retries",
            ),
        ] {
            let err = Manifest::parse(&format!("{BASE}{bad}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{bad:?} gave {err}");
        }
    }
}
