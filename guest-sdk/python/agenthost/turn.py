"""``Turn``: what one turn starts from (session, number, route, reason,
input) and everything it can do: stream messages, read the history and
the end user, run tools, end the session."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, List, Optional, Union

from . import _host
from ._json import dumps
from .errors import BadInput, ToolApprovalRequired
from .history import EndUser, History, read_end_user
from .mcp import McpTool, call_mcp, is_mcp_tool, mcp_tools
from .message import Message
from .tools import Tool, ToolCall, ToolResult, call_id, invoke, report


@dataclass
class Decision:
    """A human's decision on a gated tool call, which this turn resumes from."""

    approved: bool
    """Whether the human approved the call (with :attr:`result`, the approval
    answered it in place of the tool, which did not run)."""
    approver: str
    """Who decided (free text)."""
    call: ToolCall
    """The call that waited for the decision (its id is set)."""
    step: List[ToolCall]
    """Every call of the suspended step, in the order the agent proposed
    them, ``call`` included (each id set)."""
    message: Optional[str] = None
    """A note from the human who decided, for example why the call was
    denied (a denied call's output carries it too, so a model sees it)."""
    result: Any = None
    """The result the human gave in place of the tool (``None`` when none):
    the tool did not run, and this is the pending call's output."""
    original_arguments: Any = None
    """The agent's own arguments when the human edited them (``call`` holds
    the edited ones, which the tool ran with); ``None`` otherwise."""


def input_text(value: Any) -> Optional[str]:
    """The text of an input: a JSON string, or an object's string field ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        text = value.get("text")
        if isinstance(text, str):
            return text
    return None


class Turn:
    """One turn of a session, handed to the agent's handler.

    Every turn runs in a fresh instance: what the agent needs from earlier
    turns it reads back with :meth:`history`.
    """

    def __init__(
        self,
        session_id: str,
        number: int,
        route: str,
        input_json: str,
        decision: Optional[Decision],
        tools: Dict[str, Tool],
    ) -> None:
        try:
            self.input: Any = json.loads(input_json)
            """The turn's input as JSON data (for a resumed turn, the input of the turn it resumes)."""
        except ValueError as error:
            raise BadInput(f"the turn's input is not JSON: {error}") from None
        self.session_id = session_id
        """The session's id."""
        self.number = number
        """1 for the session's first turn, then 2, 3, ..."""
        self.route = route
        """The route the session was created on, such as ``/chat``."""
        self.decision = decision
        """The decision this turn resumes from, or ``None`` for a new input."""
        self.resumed: Optional[List[ToolResult]] = None
        """On a turn resumed by a decision: the suspended step's results in
        step order (the SDK ran the step before the handler was called).
        ``None`` on an input turn."""
        self._tools = tools
        self._calls_named = 0
        self._mcp_tools: Optional[List[McpTool]] = None

    @property
    def reason(self) -> str:
        """Why this turn runs: ``"input"`` or ``"approval_decision"``."""
        return "input" if self.decision is None else "approval_decision"

    @property
    def input_text(self) -> Optional[str]:
        """The input as text: a JSON string, or the string field ``text`` of an object."""
        return input_text(self.input)

    @property
    def pending_result(self) -> Optional[ToolResult]:
        """On a resumed turn, the result of the call the human decided on."""
        if self.decision is None or self.resumed is None:
            return None
        return next((r for r in self.resumed if r.id == self.decision.call.id), None)

    # Messages

    def message(self) -> Message:
        """Opens an assistant message (MESSAGE_START) to stream into."""
        return Message(_host.message_start())

    def say(self, text: str) -> None:
        """Writes ``text`` as a whole assistant message (start, one delta, end)."""
        message = self.message()
        message.write(text)
        message.finish()

    # History

    def history(self) -> History:
        """The session's journal, read lazily page by page."""
        return History()

    def end_user(self) -> Optional[EndUser]:
        """The end user this session serves, or ``None`` when it was created
        with an API key (an invocation or platform key) rather than by an end
        user. Each call reads the journal's first event (SESSION_CREATED)."""
        return read_end_user()

    # Tools

    def run_tools(self, calls: Iterable[ToolCall], reason: Optional[str] = None) -> List[ToolResult]:
        """Runs one step of tool calls: hands them to the host (one TOOL_CALL
        each), then, unless one of them needs a human decision, runs each
        tool in order and reports its result. An empty step does nothing.

        ``reason`` is shown to the human who decides on a gated call.

        Raises :class:`ToolApprovalRequired` when the host suspends the turn
        (none of the step's calls has run, and every further effect of this
        turn is refused): let it propagate and the turn ends cleanly; the
        turn that resumes from the decision runs the step first. A step with
        two or more gated calls is not suspended: the host fails the turn.
        """
        named = [(call.id or self._next_call_id(), call) for call in calls]
        if not named:
            return []
        wire = [(i, call.name, dumps(call.arguments)) for (i, call) in named]
        suspended = _host.tool_calls(wire, reason)
        if suspended is not None:
            raise ToolApprovalRequired(ToolCall._from_wire(*suspended))
        results = []
        for i, call in named:
            if is_mcp_tool(self, call.name):
                # The host runs it and journals its result.
                results.append(call_mcp(i, call.name))
                continue
            result = invoke(self, i, call)
            report(result)
            results.append(result)
        return results

    def mcp_tools(self) -> List[McpTool]:
        """The tools of the manifest's MCP servers (``[mcp.<name>]``), named
        ``<server>__<tool>``, listed by the host once per turn (a server that
        cannot be reached is left out). Empty when there is none."""
        return mcp_tools(self)

    def _next_call_id(self) -> str:
        self._calls_named += 1
        return call_id(self.number, self._calls_named)

    # The session

    def end_session(self) -> None:
        """Ends the session after this turn: it accepts no more input."""
        _host.end_session()

    # Timers (docs/schedules.md)

    def schedule(
        self,
        input: Any,
        *,
        after: Union[float, timedelta, None] = None,
        at: Union[str, datetime, None] = None,
    ) -> str:
        """Schedules ``input`` as a later turn of this session and returns
        the schedule's id: ``after`` seconds (or a ``timedelta``) from now,
        or ``at`` a time (RFC 3339 text with a UTC offset, or an aware
        ``datetime``); exactly one of them.

        It takes effect only if this turn ends well: the host journals it
        (TURN_SCHEDULED) in the turn's final commit, so a turn that fails
        schedules nothing. At its time the session gets a turn with
        ``input`` (queued if the session is busy). A turn makes at most 10
        schedules and a session holds at most 100 (:class:`HostError`
        ``limit`` beyond)."""
        if (after is None) == (at is None):
            raise ValueError("schedule: give `after` or `at`, exactly one")
        after_ms = None
        if after is not None:
            seconds = after.total_seconds() if isinstance(after, timedelta) else float(after)
            after_ms = max(0, int(seconds * 1000))
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError("schedule: `at` needs a time zone (an aware datetime)")
            at = at.isoformat()
        return _host.schedule(after_ms, at, dumps(input))

    def cancel_schedule(self, schedule_id: str) -> bool:
        """Cancels a schedule of this session that has not fired (made by
        this turn, an earlier one, or through the API). Returns whether one
        was pending. A cancel too is kept only if this turn ends well."""
        return _host.cancel_schedule(schedule_id)
