"""The ``guest`` export behind an agent: ``describe`` from the ``Agent``,
``handle`` around its handler (the resumed step first), and exceptions
turned into TURN_ERROR messages.

``agenthost deploy`` generates the componentize-py entry module, which is
``Guest = agenthost._export.export(app)``.
"""

from __future__ import annotations

import os
import traceback
from types import ModuleType
from typing import List, Optional

from ._json import dumps
from .agent import Agent
from .errors import AgentError, ToolApprovalRequired
from .resume import resume_step
from .tools import ToolCall
from .turn import Decision, Turn

MAX_FRAMES = 8
"""Frames of a traceback kept in a TURN_ERROR message (the innermost)."""


def find_agent(module: ModuleType) -> Agent:
    """The module's ``agent``, or its only ``Agent``; a clear error otherwise."""
    named = getattr(module, "agent", None)
    if isinstance(named, Agent):
        agent = named
    else:
        found = [v for v in vars(module).values() if isinstance(v, Agent)]
        if len(found) != 1:
            where = getattr(module, "__file__", module.__name__)
            raise TypeError(
                f"{where} must define an agent: `agent = agenthost.Agent(routes=[...])` "
                f"(found {len(found)} Agent objects and none named `agent`)"
            )
        agent = found[0]
    if not agent.routes:
        raise TypeError("the agent declares no route: `Agent(routes=[\"/chat\"])` or `agent.route(\"/chat\")`")
    if agent._handler is None:
        raise TypeError("the agent has no handler: decorate a function `def handle(turn)` with `@agent.handler`")
    return agent


def failure_message(error: BaseException) -> str:
    """What a TURN_ERROR says about an exception that left the handler:
    the SDK's own errors read as their message; any other exception as
    ``<Type>: <message>`` and a short traceback."""
    if isinstance(error, AgentError):
        return str(error)
    head = "".join(traceback.format_exception_only(type(error), error)).strip()
    frames = traceback.extract_tb(error.__traceback__)
    frames = [f for f in frames if os.path.basename(f.filename) != "_export.py"][-MAX_FRAMES:]
    if not frames:
        return head
    lines = [head, "Traceback (most recent call last):"]
    for frame in frames:
        lines.append(f'  File "{_short_path(frame.filename)}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)


def _short_path(path: str) -> str:
    """A module's path as the author knows it: componentize-py mounts each
    Python path entry at ``/<n>/``; the SDK shows as ``agenthost/...``."""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "" and parts[1].isdigit():
        return "/".join(parts[2:])
    return path


def _decision(raw) -> Optional[Decision]:
    value = getattr(raw, "value", None)
    if value is None:
        return None
    pending = value.pending_tool_call
    return Decision(
        approved=value.approved,
        approver=value.approver,
        call=ToolCall._from_wire(pending.tool_call_id, pending.name, pending.arguments),
        step=[ToolCall._from_wire(c.tool_call_id, c.name, c.arguments) for c in value.step],
    )


def export(module: ModuleType):
    """The ``Guest`` class componentize-py exports, for the agent in ``module``."""
    agent = find_agent(module)

    from componentize_py_types import Err
    from wit_world.imports import agenthost_agent_types as wit

    class Guest:
        def describe(self):
            tools: List = [
                wit.ToolSpec(
                    name=tool.name,
                    description=tool.description,
                    parameters=dumps(tool.parameters),
                    needs_approval=tool.needs_approval,
                )
                for tool in agent.tools.values()
            ]
            return wit.Description(routes=list(agent.routes), tools=tools)

        def handle(self, raw) -> None:
            try:
                turn = Turn(raw.session_id, raw.turn, raw.route, raw.input, _decision(raw.reason), agent.tools)
                if turn.decision is not None:
                    # The suspended step is answered before the handler sees the turn.
                    turn.resumed = resume_step(turn)
                handler = agent._handler
                assert handler is not None
                handler(turn)
            except ToolApprovalRequired:
                return  # the host has suspended the turn: not an error
            except BaseException as error:  # every exception ends the turn, never the instance
                raise Err(failure_message(error)) from None

    return Guest
