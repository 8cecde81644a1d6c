"""The host imports (``agenthost:agent/host`` and ``agenthost:agent/llm``),
the only module that calls them: each host error becomes a
:class:`HostError`.

The bindings (``wit_world``) exist only inside a component built by
componentize-py; imported elsewhere (an IDE, the SDK's unit tests) the SDK
loads, and calling the host raises ``RuntimeError``.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from .errors import HostError

try:  # pragma: no cover - only inside a component
    from componentize_py_types import Err
    from wit_world.imports import agenthost_agent_types as wit
    from wit_world.imports import host as _host
    from wit_world.imports import llm as _llm
except ImportError:  # outside a component
    Err = None  # type: ignore[assignment,misc]
    wit = None  # type: ignore[assignment]
    _host = None  # type: ignore[assignment]
    _llm = None  # type: ignore[assignment]

_KINDS = {
    "HostError_InvalidOrder": "invalid_order",
    "HostError_Limit": "limit",
    "HostError_Closed": "closed",
    "HostError_Unavailable": "unavailable",
}


def _bindings():
    if _host is None:
        raise RuntimeError(
            "the agenthost host imports exist only inside an agent component "
            "(built by `agenthost deploy`)"
        )
    return _host


def _call(function, *args):
    try:
        return function(*args)
    except Err as error:  # type: ignore[misc]
        raise _host_error(error.value) from None


def _host_error(value) -> HostError:
    kind = _KINDS.get(type(value).__name__, "unavailable")
    return HostError(kind, str(getattr(value, "value", value)))


def message_start() -> str:
    return _call(_bindings().message_start)


def message_delta(message_id: str, text: str) -> None:
    _call(_bindings().message_delta, message_id, text)


def message_end(message_id: str) -> None:
    _call(_bindings().message_end, message_id)


def tool_calls(
    calls: List[Tuple[str, str, str]], reason: Optional[str]
) -> Optional[Tuple[str, str, str]]:
    """Hands over a step of ``(id, name, arguments JSON)`` calls. Returns
    ``None`` to run them, or the call that suspends the turn."""
    host = _bindings()
    wire = [wit.ToolCall(tool_call_id=i, name=n, arguments=a) for (i, n, a) in calls]
    step = _call(host.tool_calls, wire, reason)
    if isinstance(step, wit.Step_Suspend):
        call = step.value
        return (call.tool_call_id, call.name, call.arguments)
    return None


_STATUS = {"ok": "OK", "error": "ERROR", "denied": "DENIED"}


def tool_result(tool_call_id: str, output: str, status: str) -> None:
    host = _bindings()
    _call(host.tool_result, tool_call_id, output, getattr(wit.ToolStatus, _STATUS[status]))


def read_history(
    after: Optional[int], limit: int
) -> Tuple[List[Tuple[int, str, str]], Optional[int]]:
    """One page: ``([(seq, event_type, payload JSON)], next)``."""
    page = _call(_bindings().read_history, after, limit)
    return [(e.seq, e.event_type, e.payload) for e in page.events], page.next


def end_session() -> None:
    _call(_bindings().end_session)


# timers (docs/schedules.md)


def schedule(after_ms: Optional[int], at: Optional[str], input_json: str) -> str:
    """Schedules ``input_json`` as a later turn: returns the schedule's id."""
    return _call(_bindings().schedule, after_ms, at, input_json)


def cancel_schedule(schedule_id: str) -> bool:
    """Cancels a pending schedule of the session: whether one was pending."""
    return _call(_bindings().cancel_schedule, schedule_id)


# mcp


_STATUS_BACK = {"OK": "ok", "ERROR": "error", "DENIED": "denied"}


def mcp_tools() -> List[Tuple[str, str, str, bool]]:
    """The MCP servers' tools: ``[(name, description, parameters JSON, needs_approval)]``."""
    specs = _call(_bindings().mcp_tools)
    return [(t.name, t.description, t.parameters, t.needs_approval) for t in specs]


def mcp_call(tool_call_id: str) -> Tuple[str, str]:
    """Runs a handed-over MCP call on the host: ``(output JSON, status)``."""
    result = _call(_bindings().mcp_call, tool_call_id)
    status = getattr(result.status, "name", str(result.status)).upper()
    return result.output, _STATUS_BACK.get(status, "error")


# llm (docs/llm.md)


class LlmRefused(Exception):
    """``complete`` failed without a host error: ``kind`` is
    ``"unknown_alias"``, ``"invalid_request"`` or ``"failed"``, ``message``
    the host's words (agenthost.llm.declared turns it into an LlmError)."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message
        super().__init__(f"{kind}: {message}")


_LLM_KINDS = {
    "LlmError_UnknownAlias": "unknown_alias",
    "LlmError_InvalidRequest": "invalid_request",
    "LlmError_Failed": "failed",
}

CompletionTuple = Tuple[
    Optional[str], str, List[Tuple[str, str, str]], str, str, int, int
]


def llm_aliases() -> List[str]:
    """The aliases of the manifest's ``[llm.<alias>]`` models, in name order."""
    _bindings()
    return list(_llm.aliases())


def llm_complete(alias: str, messages: str, tools: str, parameters: str) -> CompletionTuple:
    """One completion through the host: ``(message_id, text, [(id, name,
    arguments)], finish_reason, served_by, input_tokens, output_tokens)``.
    Raises :class:`HostError` for a host error, :class:`LlmRefused` else."""
    _bindings()
    request = _llm.CompletionRequest(
        alias=alias, messages=messages, tools=tools, parameters=parameters
    )
    try:
        done = _llm.complete(request)
    except Err as error:  # type: ignore[misc]
        value = error.value
        if type(value).__name__ == "LlmError_Host":
            raise _host_error(value.value) from None
        kind = _LLM_KINDS.get(type(value).__name__, "failed")
        raise LlmRefused(kind, str(getattr(value, "value", value))) from None
    return (
        done.message_id,
        done.text,
        [(c.id, c.name, c.arguments) for c in done.tool_calls],
        done.finish_reason,
        done.served_by,
        done.input_tokens,
        done.output_tokens,
    )
