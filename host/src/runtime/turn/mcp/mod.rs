//! MCP servers for agents: the manifest's `[mcp.<name>]` servers, which the
//! host (never the guest) calls over Streamable HTTP with their credentials.
//!
//! A deployment's servers are read from its stored manifest once, when it
//! is loaded (`McpServers::configure`); each turn resolves their secrets
//! (`McpServers::prepare`, whose values the turn's redactor also replaces)
//! and keeps, per server, its MCP session and its tool list for the turn
//! (`McpTurn`). Every HTTP
//! exchange goes through the turn's outbound access (`outbound/`): the
//! allowlist, the address check, DNS and in-flight bounds, timeouts, and
//! the HTTP_REQUEST / HTTP_RESPONSE records (never headers). The host
//! imports (`host.rs`) hand tools to the guest as `<server>__<tool>`, gate
//! their calls by the server's `approval` rule in `tool-calls`, and journal
//! a call's TOOL_RESULT themselves. Documented in docs/mcp.md.

mod client;
mod host;

pub(super) use host::Via;
pub(crate) mod settings;

use std::sync::Arc;

use serde_json::Value;

use crate::secrets::Vault;
use settings::{HeaderValue, McpServerSettings, UrlPart};

/// Most tools kept from one server (the rest are left out, with a warning).
pub(crate) const MAX_MCP_TOOLS: usize = 128;
/// Most `tools/list` pages read from one server.
pub(crate) const MAX_MCP_LIST_PAGES: usize = 16;
/// Largest response body (JSON or SSE) read from an MCP server.
pub(crate) const MAX_MCP_RESPONSE_BYTES: usize = 1 << 20;
/// Largest tool result handed to the agent and journaled (also within the
/// turn's payload limit); a larger one is an `error` result.
pub(crate) const MAX_MCP_RESULT_BYTES: usize = 256 << 10;
/// Longest tool description kept (longer ones are cut).
pub(crate) const MAX_MCP_DESCRIPTION: usize = 2048;
/// Largest input schema kept (a tool with a larger one is left out).
pub(crate) const MAX_MCP_SCHEMA_BYTES: usize = 16 << 10;

/// One `[mcp.<name>]` server of a deployment.
#[derive(Debug)]
pub(super) struct McpServer {
    pub name: String,
    pub settings: McpServerSettings,
}

/// A deployment's MCP servers, read once from its stored manifest when it
/// is loaded (checked at upload; one that no longer parses declares none).
#[derive(Clone, Default)]
pub(super) struct McpServers(Arc<[McpServer]>);

impl McpServers {
    pub(super) fn configure(manifest: &str) -> McpServers {
        McpServers(
            (settings::read(manifest).into_iter())
                .map(|(name, settings)| McpServer { name, settings })
                .collect(),
        )
    }

    /// A turn's MCP state, its servers' secrets read from `vault` now (a
    /// secret set since the last turn counts); their values are returned
    /// too, for the turn's redactor. A missing secret makes only that
    /// server's calls fail (with an error the model sees).
    pub(super) fn prepare(&self, vault: &Vault) -> (McpTurn, Vec<(String, Arc<str>)>) {
        let (terms, values) = McpTerms::resolve(self.0.clone(), vault);
        (McpTurn::new(terms), values)
    }
}

/// A server's URL and request headers for one turn, its secrets in place.
struct Resolved {
    url: String,
    headers: Vec<(String, Arc<str>)>,
}

/// A server's resolved URL and headers, or why it cannot be called.
type Headers = Result<Resolved, String>;

/// What a turn's MCP calls run under: the servers and their credentials.
#[derive(Default)]
struct McpTerms {
    servers: Arc<[McpServer]>,
    headers: Vec<Headers>,
}

impl McpTerms {
    /// Resolves the servers' secrets from `vault` (see `McpServers::prepare`).
    fn resolve(servers: Arc<[McpServer]>, vault: &Vault) -> (McpTerms, Vec<(String, Arc<str>)>) {
        let mut values = Vec::new();
        let mut headers = Vec::with_capacity(servers.len());
        for server in servers.iter() {
            let mut get = |name: &str| {
                let value = vault.get(name).ok_or_else(|| {
                    format!(
                        "MCP server `{}` needs secret `{name}`, which does not exist: set it with PUT /secrets/{name}",
                        server.name
                    )
                })?;
                values.push((name.to_string(), value.clone()));
                Ok::<_, String>(value)
            };
            let resolved = (|| {
                let mut out = Vec::new();
                if let Some(name) = &server.settings.bearer_secret {
                    let token = get(name)?;
                    out.push(("authorization".into(), format!("Bearer {token}").into()));
                }
                for (header, value) in &server.settings.headers {
                    let value = match value {
                        HeaderValue::Text(text) => Arc::from(text.as_str()),
                        HeaderValue::Secret { secret } => get(secret)?,
                    };
                    out.push((header.clone(), value));
                }
                let mut url = String::new();
                for part in settings::url_parts(&server.settings.url) {
                    match part {
                        UrlPart::Text(text) => url.push_str(text),
                        UrlPart::Secret(name) => {
                            let value = get(name)?;
                            if !settings::fits_a_url(&value) {
                                return Err(format!(
                                    "MCP server `{}`: the value of secret `{name}` cannot stand in its url (at least {} characters, only letters, digits, -, ., _ and ~)",
                                    server.name,
                                    crate::redact::MIN_REDACTED
                                ));
                            }
                            url.push_str(&value);
                        }
                    }
                }
                Ok(Resolved { url, headers: out })
            })();
            headers.push(resolved);
        }
        (McpTerms { servers, headers }, values)
    }

    fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// One MCP tool as the turn knows it.
#[derive(Debug, Clone)]
pub(super) struct McpTool {
    /// `<server>__<tool>`: the name the agent and the journal use.
    pub exposed: String,
    pub description: String,
    pub input_schema: Value,
    pub gated: bool,
}

/// A server's MCP session within one turn.
#[derive(Debug, Clone, Default)]
struct Session {
    /// `Mcp-Session-Id`, if the server gave one.
    id: Option<String>,
    /// The protocol revision the server answered.
    version: String,
}

/// A turn's MCP state: per server, its session and tool list once made.
#[derive(Default)]
pub(super) struct McpTurn {
    terms: McpTerms,
    sessions: Vec<Option<Session>>,
    /// Per server: its tools, or why they could not be listed.
    tools: Vec<Option<Result<Vec<McpTool>, String>>>,
}

impl McpTurn {
    fn new(terms: McpTerms) -> McpTurn {
        let n = terms.servers.len();
        McpTurn {
            terms,
            sessions: vec![None; n],
            tools: vec![None; n],
        }
    }

    /// The server and tool a `<server>__<tool>` name stands for, when its
    /// server is one of the deployment's.
    pub(super) fn split<'a>(&self, exposed: &'a str) -> Option<(usize, &'a str)> {
        let (server, tool) = exposed.split_once("__")?;
        let index = self.terms.servers.iter().position(|s| s.name == server)?;
        (!tool.is_empty()).then_some((index, tool))
    }
}
