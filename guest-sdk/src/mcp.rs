//! MCP tools: the tools of the MCP servers the manifest declares
//! (`[mcp.<name>]`), which the host calls on the agent's behalf (their
//! credentials never enter the agent). They are named `<server>__<tool>`;
//! [`Turn::mcp_tools`] lists them, and the model loop offers them beside the
//! agent's own. A call goes through [`Turn::run_tools`] like any other: the
//! host gates it by the server's `approval` rule, runs it and journals its
//! result (docs/mcp.md).

use serde_json::Value;

use crate::bindings::agenthost::agent::host;
use crate::bindings::agenthost::agent::types as wit;
use crate::error::{Error, host};
use crate::tools::{ToolResult, ToolStatus};
use crate::turn::Turn;

/// One tool of an MCP server, as the host lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `<server>__<tool>`: the name the model and the journal use.
    pub name: String,
    /// What the server says the tool does.
    pub description: String,
    /// The tool's input schema (a JSON Schema object).
    pub parameters: Value,
    /// Whether the host gates its calls (the server's `approval` rule).
    pub needs_approval: bool,
}

impl Turn {
    /// The MCP servers' tools, listed by the host once per turn (a server
    /// that cannot be reached is left out). Empty when the manifest declares
    /// no `[mcp.<name>]` server.
    pub fn mcp_tools(&mut self) -> Result<Vec<McpTool>, Error> {
        if let Some(tools) = &self.mcp_tools {
            return Ok(tools.clone());
        }
        let listed: Vec<McpTool> = host(host::mcp_tools())?
            .into_iter()
            .map(|spec| McpTool {
                parameters: serde_json::from_str(&spec.parameters)
                    .unwrap_or_else(|_| serde_json::json!({"type": "object"})),
                name: spec.name,
                description: spec.description,
                needs_approval: spec.needs_approval,
            })
            .collect();
        self.mcp_tools = Some(listed.clone());
        Ok(listed)
    }

    /// Whether the host answers a call of `name`: any tool that is not one
    /// of the agent's own (an MCP server's, or an unknown one, which the
    /// host answers as an `error`).
    pub(crate) fn is_mcp_tool(&self, name: &str) -> bool {
        !self.tools.iter().any(|t| t.name == name)
    }

    /// Has the host run a handed-over MCP call (or answer it as the human
    /// decided) and journal its result; returns that result.
    pub(crate) fn call_mcp(&mut self, id: String, name: String) -> Result<ToolResult, Error> {
        let result = host(host::mcp_call(&id))?;
        let status = match result.status {
            wit::ToolStatus::Ok => ToolStatus::Ok,
            wit::ToolStatus::Error => ToolStatus::Error,
            wit::ToolStatus::Denied => ToolStatus::Denied,
        };
        let output = serde_json::from_str(&result.output).unwrap_or(Value::String(result.output));
        Ok(ToolResult {
            id,
            name,
            status,
            output,
        })
    }
}
