"""``Agent``: where an agent declares its routes, its tools and its handler.
The host's ``describe`` is derived from it.

The agent's module runs once, when the component is built (componentize-py
imports it and snapshots the interpreter), so an ``Agent`` and its tools
are declared once and every turn starts from that snapshot. Read the
environment (secrets, ``SERVICE_APPROVAL_POLICY``) inside the handler or
the tools, never at import time: at build time it is the builder's.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, TypeVar

from .schema import function_schema
from .tools import Tool, with_approver
from .turn import Turn

F = TypeVar("F", bound=Callable[..., Any])

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ROUTE = re.compile(r"^/[A-Za-z0-9\-_./]{0,127}$")


def _is_turn(name: str, hint: Any) -> bool:
    if hint is Turn or (isinstance(hint, str) and hint.split(".")[-1] == "Turn"):
        return True
    return hint is inspect.Parameter.empty and name == "turn"


class Agent:
    """An agent: routes, tools and the function that handles each turn.

    ::

        from agenthost import Agent, Turn

        agent = Agent(routes=["/chat"])

        @agent.tool
        def word_count(text: str) -> int:
            \"\"\"Counts the words of `text`.\"\"\"
            return len(text.split())

        @agent.handler
        def handle(turn: Turn) -> None:
            turn.say(f"You said: {turn.input_text}")

    ``agenthost deploy`` exports the ``Agent`` named ``agent`` in the
    project's ``app.py`` (or the only ``Agent`` there).
    """

    def __init__(self, routes: Iterable[str] = ()) -> None:
        self.routes: List[str] = []
        self.tools: Dict[str, Tool] = {}
        self._handler: Optional[Callable[[Any], Any]] = None
        for path in routes:
            self.route(path)

    def route(self, path: str) -> "Agent":
        """Serves the agent on ``path``, such as ``/chat`` (starts with
        ``/``; letters, digits and ``- _ . /``; at most 128 characters; unique)."""
        if not isinstance(path, str) or not _ROUTE.match(path):
            raise ValueError(
                f"route {path!r} must start with `/` and use only letters, digits and - _ . / "
                "(at most 128 characters)"
            )
        if path in self.routes:
            raise ValueError(f"route {path!r} is declared twice")
        self.routes.append(path)
        return self

    def tool(
        self,
        function: Optional[F] = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        needs_approval: bool = False,
        parameters: Optional[Dict[str, Any]] = None,
        approver: Optional[str] = None,
    ) -> Any:
        """Registers a tool; use as ``@agent.tool`` or ``@agent.tool(...)``.

        The tool's name is the function's (or ``name``), its description the
        docstring's text before any ``Args:`` section (or ``description``),
        and the JSON Schema of its arguments comes from the parameters' type
        hints (see :mod:`agenthost.schema`), unless ``parameters`` gives it
        by hand. A parameter annotated ``Turn`` (or an unannotated one named
        ``turn``) receives the running turn instead of an argument.

        When called, the arguments are checked against the hints and
        converted (a dataclass parameter gets an instance); arguments that
        do not fit, an exception, or a return value that is not JSON make
        the result an ``error`` whose output is the message. The return
        value (JSON data, dataclasses and enums included) is the output.

        ``needs_approval=True`` gates the tool in code: each call waits for
        a human decision before it runs. ``approver="end_user"`` lets the
        session's own end user decide its calls (operators still may), as
        the manifest's ``approver = "end_user"`` does (see
        :func:`agenthost.tools.with_approver`).
        """

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            if not _TOOL_NAME.match(tool_name):
                raise ValueError(f"tool name {tool_name!r} must be 1 to 64 letters, digits, _ or -")
            if tool_name in self.tools:
                raise ValueError(f"tool {tool_name!r} is declared twice")
            text, schema, turn_params, hints, var_keyword = function_schema(fn, _is_turn)
            checked = parameters is None
            if parameters is not None:
                if not isinstance(parameters, dict):
                    raise TypeError(f"tool {tool_name}: parameters must be a JSON Schema object (a dict)")
                schema = parameters
            schema = with_approver(tool_name, schema, approver)
            self.tools[tool_name] = Tool(
                name=tool_name,
                description=description if description is not None else text,
                parameters=schema,
                needs_approval=bool(needs_approval),
                function=fn,
                turn_params=turn_params,
                hints=hints,
                required=list(schema.get("required", [])) if checked else [],
                var_keyword=var_keyword,
                checked=checked,
            )
            return fn

        if function is not None:
            return register(function)
        return register

    def handler(self, function: F) -> F:
        """Registers the function that handles each turn: ``handler(turn)``.

        Returning ends the turn with TURN_ENDED; an exception with
        TURN_ERROR (:mod:`agenthost.errors`), except
        :class:`ToolApprovalRequired`, which suspends it. On a turn resumed
        by a decision, the SDK has already run the suspended step when the
        handler is called (:attr:`Turn.resumed`).
        """
        if self._handler is not None:
            raise ValueError("the agent already has a handler")
        self._handler = function
        return function
