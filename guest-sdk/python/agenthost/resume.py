"""Resuming a suspended step. On a turn whose reason is an approval
decision, the SDK runs the step the human decided on *before* the agent's
handler sees the turn (so no agent can forget to answer it): every ungated
call runs, the gated call runs if approved or is reported ``denied`` with
the output ``"denied by <approver>"``. The results are
:attr:`Turn.resumed`."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

from .tools import ToolCall, ToolResult, ToolStatus, invoke, report

if TYPE_CHECKING:
    from .turn import Decision, Turn

Action = Tuple[str, ToolCall]
"""``("run", call)`` or ``("deny", call)``."""


def plan(decision: "Decision") -> List[Action]:
    """The suspended step's calls in their original order, each with what to
    do: every call runs, except the pending one when it was denied. A step
    that does not list the pending call gets it at the end, so it is
    answered all the same."""
    pending = decision.call.id
    step = list(decision.step)
    if not any(call.id == pending for call in step):
        step.append(decision.call)
    return [
        ("deny" if call.id == pending and not decision.approved else "run", call)
        for call in step
    ]


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
    results = []
    for action, call in plan(decision):
        call_id = call.id or ""
        if action == "run":
            result = invoke(turn, call_id, call)
        else:
            output = f"denied by {decision.approver}"
            result = ToolResult(call_id, call.name, ToolStatus.DENIED, output)
        report(result)
        results.append(result)
    return results
