//! What a turn's MCP state does for the `mcp-tools` and `mcp-call`
//! imports and the gating of MCP calls in `tool-calls` (`turn/mcp_calls.rs`,
//! the imports themselves): it lists each server's tools at most once,
//! gates a call by its server's `approval` rule, and sends an allowed call.
//! A call of a tool the server could not list (or does not list) fails at
//! once, ungated, unless the manifest's `approval` list names it: no human
//! is asked about a call that cannot run. A server that fails, hangs or is
//! refused is an `error` result the model sees; the turn goes on.

use std::collections::HashSet;

use serde_json::{Value, json};
use uuid::Uuid;

use super::client::{Client, McpError};
use super::{
    MAX_MCP_DESCRIPTION, MAX_MCP_LIST_PAGES, MAX_MCP_SCHEMA_BYTES, MAX_MCP_TOOLS, McpTool, McpTurn,
};
use crate::redact::Redactor;
use crate::runtime::bindings::agenthost::agent::types::ToolSpec;
use crate::runtime::bindings::{ToolCall, ToolStatus};
use crate::runtime::turn::outbound::OutboundHooks;

/// What the turn's MCP exchanges go through: its outbound access, its
/// redactor, and its session (for the log).
pub(in crate::runtime::turn) struct Via<'a> {
    pub outbound: &'a OutboundHooks,
    pub redactor: &'a Redactor,
    pub session: Uuid,
}

impl McpTurn {
    /// Whether the deployment has no MCP server.
    pub(in crate::runtime::turn) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Every server's tools (listed once per turn).
    pub(in crate::runtime::turn) async fn tools(&mut self, via: &Via<'_>) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        for index in 0..self.terms.servers.len() {
            if let Ok(tools) = self.list(index, via).await {
                specs.extend(tools.iter().map(|t| ToolSpec {
                    name: t.exposed.clone(),
                    description: t.description.clone(),
                    parameters: t.input_schema.to_string(),
                    needs_approval: t.gated,
                }));
            }
        }
        specs
    }

    /// The names among `calls` that are MCP tools whose calls are gated.
    /// A tool the manifest's `approval` list names is gated whatever its
    /// server answers; any other is judged by the server's list (its
    /// annotations count only with `trust_annotations`), and one that
    /// cannot be listed, or that its server does not list, is not gated:
    /// its call fails at once with an error the model sees (`send`).
    pub(in crate::runtime::turn) async fn gated(
        &mut self,
        calls: &[ToolCall],
        via: &Via<'_>,
    ) -> HashSet<String> {
        let mut gated = HashSet::new();
        for call in calls {
            let Some((index, tool)) = self.split(&call.name) else {
                continue;
            };
            let is_gated = if self.terms.servers[index].settings.names_gated(tool) {
                true
            } else {
                let listed = self.list(index, via).await.ok();
                let tool = listed.and_then(|tools| tools.iter().find(|t| t.exposed == call.name));
                tool.is_some_and(|t| t.gated)
            };
            if is_gated {
                gated.insert(call.name.clone());
            }
        }
        gated
    }

    /// Why a call of `exposed` on server `index` fails without being sent:
    /// this turn could not list the server's tools, or they do not hold it
    /// (and the manifest does not name it as gated). A turn that has not
    /// listed them (a resumed one) sends the call.
    fn unsendable(&self, index: usize, tool: &str, exposed: &str) -> Option<String> {
        let server = &self.terms.servers[index];
        if server.settings.names_gated(tool) {
            return None;
        }
        match &self.tools[index] {
            Some(Err(err)) => Some(format!(
                "MCP server `{}` could not list its tools, so the call was not sent: {err}",
                server.name
            )),
            Some(Ok(tools)) if !tools.iter().any(|t| t.exposed == exposed) => Some(format!(
                "MCP server `{}` offers no tool `{tool}`: the call was not sent",
                server.name
            )),
            _ => None,
        }
    }

    /// The name of the MCP server a tool name belongs to, if it is one.
    pub(in crate::runtime::turn) fn server_of(&self, name: &str) -> Option<String> {
        let (index, _) = self.split(name)?;
        Some(self.terms.servers[index].name.clone())
    }

    /// Server `index`'s tools, listed on first use (an error is kept too).
    async fn list(&mut self, index: usize, via: &Via<'_>) -> Result<&[McpTool], String> {
        if self.tools[index].is_none() {
            let listed = self.list_now(index, via).await;
            if let Err(err) = &listed {
                let server = &self.terms.servers[index].name;
                tracing::info!(session = %via.session, server = %server, error = %err, "cannot list the MCP server's tools");
            }
            self.tools[index] =
                Some(listed.map_err(|e| via.redactor.redact(&e.to_string()).into_owned()));
        }
        match &self.tools[index] {
            Some(Ok(tools)) => Ok(tools),
            Some(Err(err)) => Err(err.clone()),
            None => Err("not listed".into()),
        }
    }

    async fn list_now(&mut self, index: usize, via: &Via<'_>) -> Result<Vec<McpTool>, McpError> {
        let requests = via.outbound.host_requests();
        let server = &self.terms.servers[index];
        let resolved = match &self.terms.headers[index] {
            Ok(resolved) => resolved,
            Err(why) => return Err(McpError::Config(why.clone())),
        };
        let client = Client {
            server,
            url: &resolved.url,
            headers: &resolved.headers,
            requests: &requests,
        };
        let session = &mut self.sessions[index];
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_MCP_LIST_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let result = client.request(session, "tools/list", params).await?;
            for tool in (result.get("tools").and_then(Value::as_array))
                .into_iter()
                .flatten()
            {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let exposed = format!("{}__{name}", server.name);
                if !crate::runtime::valid_tool_name(&exposed) {
                    tracing::warn!(server = %server.name, tool = %name, "an MCP tool whose name does not fit `<server>__<tool>` (64 letters, digits, _ or -) is left out");
                    continue;
                }
                if tools.len() >= MAX_MCP_TOOLS {
                    tracing::warn!(server = %server.name, "the MCP server lists more than {MAX_MCP_TOOLS} tools: the rest are left out");
                    return Ok(tools);
                }
                let schema = (tool.get("inputSchema").cloned())
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({"type": "object"}));
                if schema.to_string().len() > MAX_MCP_SCHEMA_BYTES {
                    tracing::warn!(server = %server.name, tool = %name, "an MCP tool whose input schema is larger than {MAX_MCP_SCHEMA_BYTES} bytes is left out");
                    continue;
                }
                let mut description = (tool.get("description").and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_string();
                crate::util::truncate_utf8(&mut description, MAX_MCP_DESCRIPTION);
                let read_only = tool
                    .pointer("/annotations/readOnlyHint")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                tools.push(McpTool {
                    exposed,
                    description,
                    input_schema: schema,
                    gated: server.settings.gates(name, read_only),
                });
            }
            cursor = (result.get("nextCursor").and_then(Value::as_str)).map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// Calls `tool` on server `index`: its result (`error` when the server
    /// says so), or the failure as an `error` result.
    pub(in crate::runtime::turn) async fn send(
        &mut self,
        index: usize,
        tool: &str,
        arguments: Value,
        via: &Via<'_>,
    ) -> (ToolStatus, Value) {
        let server = &self.terms.servers[index];
        let exposed = format!("{}__{tool}", server.name);
        if let Some(why) = self.unsendable(index, tool, &exposed) {
            tracing::info!(session = %via.session, server = %server.name, tool = %tool, "an MCP call not sent: its server's tools could not be listed or do not hold it");
            return (ToolStatus::Error, Value::String(why));
        }
        let requests = via.outbound.host_requests();
        let result = match &self.terms.headers[index] {
            Err(why) => Err(McpError::Config(why.clone())),
            Ok(resolved) => {
                let client = Client {
                    server,
                    url: &resolved.url,
                    headers: &resolved.headers,
                    requests: &requests,
                };
                let params = json!({"name": tool, "arguments": arguments});
                let session = &mut self.sessions[index];
                client.request(session, "tools/call", params).await
            }
        };
        match result {
            Ok(result) => {
                let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
                let mut output = json!({
                    "content": result.get("content").cloned().unwrap_or_else(|| json!([])),
                });
                if let Some(structured) = result.get("structuredContent") {
                    output["structuredContent"] = structured.clone();
                }
                let status = if failed {
                    ToolStatus::Error
                } else {
                    ToolStatus::Ok
                };
                (status, output)
            }
            Err(err) => {
                tracing::info!(session = %via.session, server = %server.name, error = %via.redactor.redact(&err.to_string()), "MCP call failed");
                (ToolStatus::Error, Value::String(err.to_string()))
            }
        }
    }
}
