//! The `mcp-tools` and `mcp-call` imports, and the gating of MCP calls in
//! `tool-calls`: a turn lists each server's tools at most once, gates a
//! call by its server's `approval` rule (a tool it cannot list is gated),
//! and runs an allowed call once, journaling its TOOL_RESULT itself. A
//! server that fails, hangs or is refused is an `error` result the model
//! sees; the turn goes on.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::client::{Client, McpError};
use super::settings::Approval;
use super::{
    MAX_MCP_DESCRIPTION, MAX_MCP_LIST_PAGES, MAX_MCP_RESULT_BYTES, MAX_MCP_SCHEMA_BYTES,
    MAX_MCP_TOOLS, McpTool,
};
use crate::journal::TurnErrorKind;
use crate::runtime::bindings::agenthost::agent::host::McpResult;
use crate::runtime::bindings::agenthost::agent::types::ToolSpec;
use crate::runtime::bindings::{HostError, ToolCall, ToolStatus};
use crate::runtime::turn::ctx::TurnCtx;

impl TurnCtx {
    /// `mcp-tools`: every server's tools (listed once per turn).
    pub(in crate::runtime) async fn mcp_tools(&mut self) -> Result<Vec<ToolSpec>, HostError> {
        self.gate.check()?;
        let mut specs = Vec::new();
        for index in 0..self.mcp.terms.servers.len() {
            if let Ok(tools) = self.mcp_list(index).await {
                specs.extend(tools.iter().map(|t| ToolSpec {
                    name: t.exposed.clone(),
                    description: t.description.clone(),
                    parameters: t.input_schema.to_string(),
                    needs_approval: t.gated,
                }));
            }
        }
        Ok(specs)
    }

    /// The names among `calls` that are MCP tools whose calls are gated.
    /// A tool that cannot be listed, or that its server does not list, is
    /// gated: the host never runs an MCP call it could not judge.
    pub(in crate::runtime) async fn mcp_gated(&mut self, calls: &[ToolCall]) -> HashSet<String> {
        let mut gated = HashSet::new();
        if self.mcp.terms.is_empty() || self.gate.check().is_err() {
            return gated;
        }
        for call in calls {
            let Some((index, tool)) = self.mcp.split(&call.name) else {
                continue;
            };
            let approval = &self.mcp.terms.servers[index].settings.approval;
            let is_gated = if *approval == Approval::NotReadOnly {
                // Only this rule needs the tool's annotations: its list.
                let listed = self.mcp_list(index).await.ok();
                let tool = listed.and_then(|tools| tools.iter().find(|t| t.exposed == call.name));
                tool.is_none_or(|t| t.gated)
            } else {
                approval.gates(tool, false)
            };
            if is_gated {
                gated.insert(call.name.clone());
            }
        }
        gated
    }

    /// The name of the MCP server a tool name belongs to, if it is one.
    pub(in crate::runtime) fn mcp_server_of(&self, name: &str) -> Option<String> {
        let (index, _) = self.mcp.split(name)?;
        Some(self.mcp.terms.servers[index].name.clone())
    }

    /// Server `index`'s tools, listed on first use (an error is kept too).
    async fn mcp_list(&mut self, index: usize) -> Result<&[McpTool], String> {
        if self.mcp.tools[index].is_none() {
            let listed = self.mcp_list_now(index).await;
            if let Err(err) = &listed {
                let server = &self.mcp.terms.servers[index].name;
                tracing::info!(session = %self.journal.session, server = %server, error = %err, "cannot list the MCP server's tools");
            }
            self.mcp.tools[index] =
                Some(listed.map_err(|e| self.redactor.redact(&e.to_string()).into_owned()));
        }
        match &self.mcp.tools[index] {
            Some(Ok(tools)) => Ok(tools),
            Some(Err(err)) => Err(err.clone()),
            None => Err("not listed".into()),
        }
    }

    async fn mcp_list_now(&mut self, index: usize) -> Result<Vec<McpTool>, McpError> {
        let requests = self.outbound.host_requests();
        let server = &self.mcp.terms.servers[index];
        let headers = match &self.mcp.terms.headers[index] {
            Ok(headers) => headers,
            Err(why) => return Err(McpError::Config(why.clone())),
        };
        let client = Client {
            server,
            headers,
            requests: &requests,
        };
        let session = &mut self.mcp.sessions[index];
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
                    gated: server.settings.approval.gates(name, read_only),
                });
            }
            cursor = (result.get("nextCursor").and_then(Value::as_str)).map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// `mcp-call`: runs a handed-over MCP call (once) and journals its result.
    pub(in crate::runtime) async fn mcp_call(
        &mut self,
        tool_call_id: String,
    ) -> Result<McpResult, HostError> {
        let mut turn = self.open()?;
        let Some(name) = turn.calls.pending(&tool_call_id).cloned() else {
            let message = format!(
                "mcp-call for tool call `{tool_call_id}`, which is not waiting for a result"
            );
            return Err(turn.fail(TurnErrorKind::InvalidOrder, message));
        };
        let target = (turn.mcp.split(&name)).map(|(index, tool)| (index, tool.to_string()));
        let given = turn.calls.given_result(&tool_call_id).cloned();
        let (status, output) = if turn.calls.is_denied(&tool_call_id) {
            let why = (turn.calls.denial().cloned()).unwrap_or_else(|| "denied".into());
            (ToolStatus::Denied, Value::String(why))
        } else if let Some(given) = given {
            (ToolStatus::Ok, given)
        } else if let Some((index, tool)) = target {
            let arguments =
                (turn.calls.arguments(&tool_call_id).cloned()).unwrap_or_else(|| json!({}));
            self.mcp_send(index, &tool, arguments).await
        } else {
            // Neither the agent's own tool nor an MCP server's: answered as
            // the SDKs answer an unknown tool.
            let output = Value::String(format!("unknown tool: {name}"));
            (ToolStatus::Error, output)
        };
        let mut text = self.redactor.redact(&output.to_string()).into_owned();
        let max = MAX_MCP_RESULT_BYTES.min(self.limits.max_payload_bytes);
        let status = if text.len() > max {
            text = Value::String(format!(
                "the MCP tool's result is larger than {max} bytes: it was not kept"
            ))
            .to_string();
            ToolStatus::Error
        } else {
            status
        };
        self.tool_result(tool_call_id.clone(), text.clone(), status)
            .await?;
        self.calls.forget_arguments(&tool_call_id);
        Ok(McpResult {
            output: text,
            status,
        })
    }

    /// Calls `tool` on server `index`: its result (`error` when the server
    /// says so), or the failure as an `error` result.
    async fn mcp_send(
        &mut self,
        index: usize,
        tool: &str,
        arguments: Value,
    ) -> (ToolStatus, Value) {
        let requests = self.outbound.host_requests();
        let server = &self.mcp.terms.servers[index];
        let result = match &self.mcp.terms.headers[index] {
            Err(why) => Err(McpError::Config(why.clone())),
            Ok(headers) => {
                let client = Client {
                    server,
                    headers,
                    requests: &requests,
                };
                let params = json!({"name": tool, "arguments": arguments});
                let session = &mut self.mcp.sessions[index];
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
                tracing::info!(session = %self.journal.session, server = %server.name, error = %self.redactor.redact(&err.to_string()), "MCP call failed");
                (ToolStatus::Error, Value::String(err.to_string()))
            }
        }
    }
}
