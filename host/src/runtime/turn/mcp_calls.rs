//! The `mcp-tools` and `mcp-call` imports, and the gating of MCP calls in
//! `tool-calls`, as the turn's methods: each asks the turn's gate and
//! bookkeeping, and leaves the servers to the turn's MCP state (`mcp/`),
//! through its outbound access; a call's TOOL_RESULT is journaled here,
//! by the host, once.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::ctx::TurnCtx;
use super::mcp::{MAX_MCP_RESULT_BYTES, Via};
use crate::journal::TurnErrorKind;
use crate::runtime::bindings::agenthost::agent::host::McpResult;
use crate::runtime::bindings::agenthost::agent::types::ToolSpec;
use crate::runtime::bindings::{HostError, ToolCall, ToolStatus};

impl TurnCtx {
    /// `mcp-tools`: every server's tools (listed once per turn).
    pub(super) async fn mcp_tools(&mut self) -> Result<Vec<ToolSpec>, HostError> {
        self.gate.check()?;
        let via = Via {
            outbound: &self.outbound,
            redactor: &self.redactor,
            session: self.journal.session,
        };
        Ok(self.mcp.tools(&via).await)
    }

    /// The names among `calls` that are MCP tools whose calls are gated
    /// (`McpTurn::gated`); none once the gate is closed.
    pub(super) async fn mcp_gated(&mut self, calls: &[ToolCall]) -> HashSet<String> {
        if self.mcp.is_empty() || self.gate.check().is_err() {
            return HashSet::new();
        }
        let via = Via {
            outbound: &self.outbound,
            redactor: &self.redactor,
            session: self.journal.session,
        };
        self.mcp.gated(calls, &via).await
    }

    /// The name of the MCP server a tool name belongs to, if it is one.
    pub(super) fn mcp_server_of(&self, name: &str) -> Option<String> {
        self.mcp.server_of(name)
    }

    /// `mcp-call`: runs a handed-over MCP call (once) and journals its result.
    pub(super) async fn mcp_call(&mut self, tool_call_id: String) -> Result<McpResult, HostError> {
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
            let via = Via {
                outbound: &self.outbound,
                redactor: &self.redactor,
                session: self.journal.session,
            };
            self.mcp.send(index, &tool, arguments, &via).await
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
}
