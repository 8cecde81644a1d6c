"""Resuming a suspended step. On a turn whose reason is an approval
decision, the SDK runs the step the human decided on *before* the agent's
handler sees the turn (so no agent can forget to answer it): every ungated
call runs, the gated call runs if approved (with the human's edited
arguments, if any), is reported ``ok`` with the result a human gave in its
place (it does not run), or is reported ``denied`` with the output
``"denied by <approver>"`` (``"denied by <approver>: <message>"`` with a
message). The decision's message, given result and original arguments are
read from its event in the journal first. The results are
:attr:`Turn.resumed`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Tuple

from . import journal
from .history import Event
from .mcp import call_mcp, is_mcp_tool
from .tools import ToolCall, ToolResult, ToolStatus, invoke, report

if TYPE_CHECKING:
    from .turn import Decision, Turn

Action = Tuple[str, ToolCall]
"""``("run", call)``, ``("deny", call)`` or ``("answer", call)``."""


def complete(decision: "Decision", events: Iterable[Event]) -> None:
    """Completes ``decision`` from its event (the last TOOL_APPROVAL_GRANTED
    or _DENIED of the pending call): its message, a given result and the
    original arguments. The WIT record says ``approved: false`` when a
    result was given (so an SDK from before results runs nothing); the
    event says it was approved."""
    found = None
    for event in events:
        if event.event_type in (journal.TOOL_APPROVAL_GRANTED, journal.TOOL_APPROVAL_DENIED) and (
            isinstance(event.payload, dict)
            and event.payload.get("tool_call_id") == decision.call.id
        ):
            found = event
    if found is None:
        return
    message = found.payload.get("message")
    decision.message = message if isinstance(message, str) else None
    decision.result = found.payload.get("result")
    decision.original_arguments = found.payload.get("original_arguments")
    if found.event_type == journal.TOOL_APPROVAL_GRANTED:
        decision.approved = True


def _action(decision: "Decision", call: ToolCall) -> str:
    if call.id != decision.call.id:
        return "run"
    if decision.approved and decision.result is not None:
        return "answer"
    return "run" if decision.approved else "deny"


def plan(decision: "Decision") -> List[Action]:
    """The suspended step's calls in their original order, each with what to
    do: every call runs, except the pending one when it was denied. A step
    that does not list the pending call gets it at the end, so it is
    answered all the same."""
    pending = decision.call.id
    step = list(decision.step)
    if not any(call.id == pending for call in step):
        step.append(decision.call)
    return [(_action(decision, call), call) for call in step]


def resume_step(turn: "Turn") -> List[ToolResult]:
    """Runs the suspended step of a resumed turn, reporting each result to
    the host as it comes (so a later tool sees the earlier results in the
    history). Returns every result in step order. The SDK calls it before
    the handler; a second call runs nothing and returns the same results
    (the step runs exactly once)."""
    decision = turn.decision
    if decision is None:
        return []
    if turn.resumed is not None:
        return turn.resumed
    complete(decision, turn.history())
    results = []
    for action, call in plan(decision):
        call_id = call.id or ""
        if is_mcp_tool(turn, call.name):
            # The host runs it (or answers it as the human decided) and journals its result.
            results.append(call_mcp(call_id, call.name))
            continue
        if action == "run":
            result = invoke(turn, call_id, call)
        elif action == "answer":
            result = ToolResult(call_id, call.name, ToolStatus.OK, decision.result)
        else:
            output = f"denied by {decision.approver}"
            if decision.message is not None:
                output += f": {decision.message}"
            result = ToolResult(call_id, call.name, ToolStatus.DENIED, output)
        report(result)
        results.append(result)
    return results
