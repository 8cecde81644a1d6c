"""MCP tools: the tools of the MCP servers the manifest declares
(``[mcp.<name>]``), which the host calls on the agent's behalf (their
credentials never enter the agent). They are named ``<server>__<tool>``;
:meth:`Turn.mcp_tools` lists them, and the model loop offers them beside the
agent's own. A call goes through :meth:`Turn.run_tools` like any other: the
host gates it by the server's ``approval`` rule, runs it and journals its
result (docs/mcp.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List

from . import _host
from .tools import ToolResult, ToolStatus

if TYPE_CHECKING:  # pragma: no cover
    from .turn import Turn


@dataclass
class McpTool:
    """One tool of an MCP server, as the host lists it."""

    name: str
    """``<server>__<tool>``: the name the model and the journal use."""
    description: str
    """What the server says the tool does."""
    parameters: Dict[str, Any] = field(default_factory=dict)
    """The tool's input schema (a JSON Schema object)."""
    needs_approval: bool = False
    """Whether the host gates its calls (the server's ``approval`` rule)."""


def mcp_tools(turn: "Turn") -> List[McpTool]:
    """The MCP servers' tools, listed by the host once per turn."""
    cached = getattr(turn, "_mcp_tools", None)
    if cached is not None:
        return list(cached)
    listed = []
    for name, description, parameters, needs_approval in _host.mcp_tools():
        try:
            schema = json.loads(parameters)
        except ValueError:
            schema = {"type": "object"}
        listed.append(McpTool(name, description, schema, needs_approval))
    turn._mcp_tools = listed
    return list(listed)


def is_mcp_tool(turn: "Turn", name: str) -> bool:
    """Whether the host answers a call of ``name``: any tool that is not one
    of the agent's own (an MCP server's, or an unknown one, which the host
    answers as an ``error``)."""
    return name not in turn._tools


def call_mcp(call_id: str, name: str) -> ToolResult:
    """Has the host run a handed-over MCP call (or answer it as the human
    decided) and journal its result; returns that result."""
    output, status = _host.mcp_call(call_id)
    try:
        value = json.loads(output)
    except ValueError:
        value = output
    return ToolResult(call_id, name, ToolStatus(status), value)
