"""Tools: calls, results, the registered tools, and the step protocol
(:meth:`Turn.run_tools`; resuming a suspended step is in :mod:`agenthost.resume`).
"""

from __future__ import annotations

import enum
import inspect
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from . import _host
from ._json import dumps, to_json_value
from .schema import ArgumentError, convert_arguments

if TYPE_CHECKING:
    from .turn import Turn


@dataclass
class ToolCall:
    """One tool call: a tool's name and its arguments (JSON data, usually a dict).

    ``id`` is unique within the session (the tool's idempotency key);
    ``None`` lets :meth:`Turn.run_tools` name it ``call_<turn>_<n>``.
    """

    name: str
    arguments: Any = field(default_factory=dict)
    id: Optional[str] = None

    @classmethod
    def _from_wire(cls, tool_call_id: str, name: str, arguments: str) -> "ToolCall":
        """A call the host hands back. Arguments that are not JSON are kept
        as a string, so the tool reports them as invalid."""
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = arguments
        return cls(name=name, arguments=parsed, id=tool_call_id)


class ToolStatus(str, enum.Enum):
    """How a tool call ended."""

    OK = "ok"
    """The tool returned."""
    ERROR = "error"
    """The tool raised, or is unknown, or its arguments did not fit."""
    DENIED = "denied"
    """A human denied the call."""

    # As its value in f-strings and str(), like the TypeScript SDK's
    # (`denied`, not `ToolStatus.DENIED`); comparisons with "denied" hold too.
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass
class ToolResult:
    """The outcome of one tool call, as reported to the host (TOOL_RESULT)."""

    id: str
    name: str
    status: ToolStatus
    output: Any
    """The tool's return value as JSON data, or for an error or a denial a string saying why."""


@dataclass
class Tool:
    """A registered tool: its spec and its function."""

    name: str
    description: str
    parameters: Dict[str, Any]
    needs_approval: bool
    function: Callable[..., Any]
    turn_params: List[str]
    hints: Dict[str, Any]
    required: List[str]
    var_keyword: bool
    checked: bool
    """Whether the arguments are checked against the type hints (not when
    ``parameters`` was given by hand)."""

    def call(self, turn: "Turn", arguments: Any) -> Any:
        if self.checked:
            kwargs = convert_arguments(self.hints, self.required, self.var_keyword, arguments)
        elif isinstance(arguments, dict):
            kwargs = dict(arguments)
        else:
            raise ArgumentError("invalid type: expected an object")
        for name in self.turn_params:
            kwargs[name] = turn
        if not self.checked:
            try:
                inspect.signature(self.function).bind(**kwargs)
            except TypeError as error:
                raise ArgumentError(str(error)) from None
        return self.function(**kwargs)


def invoke(turn: "Turn", call_id: str, call: ToolCall) -> ToolResult:
    """Runs a call's tool (without reporting it): its return value is the
    output (``ok``); an exception, unknown tool or arguments that do not fit
    make an ``error`` whose output is the message."""
    tool = turn._tools.get(call.name)
    if tool is None:
        return ToolResult(call_id, call.name, ToolStatus.ERROR, f"unknown tool: {call.name}")
    try:
        output = tool.call(turn, call.arguments)
    except ArgumentError as error:
        return ToolResult(call_id, call.name, ToolStatus.ERROR, f"invalid arguments: {error}")
    except Exception as error:
        return ToolResult(call_id, call.name, ToolStatus.ERROR, str(error) or type(error).__name__)
    try:
        output = to_json_value(output)
    except (TypeError, ValueError) as error:
        return ToolResult(call_id, call.name, ToolStatus.ERROR, f"invalid output: {error}")
    return ToolResult(call_id, call.name, ToolStatus.OK, output)


def report(result: ToolResult) -> None:
    """Reports a result to the host (TOOL_RESULT)."""
    _host.tool_result(result.id, dumps(result.output), result.status.value)


def call_id(turn: int, n: int) -> str:
    """The id the SDK gives the ``n``th call (from 1) it names in turn ``turn``."""
    return f"call_{turn}_{n}"


#: The parameters-schema keyword by which a tool's code names who may
#: decide its calls; the host reads it at deploy (docs/end-users.md).
APPROVER_KEYWORD = "x-agenthost-approver"


def with_approver(tool: str, schema: Dict[str, Any], approver: Optional[str]) -> Dict[str, Any]:
    """The tool's parameters schema, saying who may decide its calls.

    ``approver="end_user"``: the session's own end user may (operators still
    may), as the manifest's ``[tools.<name>] approver = "end_user"`` says;
    it matters where the tool is gated (``needs_approval=True``, the
    manifest, or the operator's policy). ``None`` or ``"operator"``: only
    operators, the default. A copy: the schema given is left as it is.
    """
    if approver is None or approver == "operator":
        return schema
    if approver != "end_user":
        raise ValueError(f"tool {tool}: approver must be \"end_user\" or \"operator\", not {approver!r}")
    return {**schema, APPROVER_KEYWORD: "end_user"}
