"""What can go wrong in a turn, and how it reads in TURN_ERROR.

An exception that leaves ``handle`` ends the turn with a TURN_ERROR
(``agent_error``). For the SDK's own errors (:class:`AgentError` and its
subclasses) the message is ``str(error)``, worded as the Rust SDK words
the same error; for any other exception it is ``"<Type>: <message>"``
followed by a short traceback.

:class:`ToolApprovalRequired` is not an error: it is how a turn suspends
at a gated tool call. It derives from ``BaseException`` so that an
``except Exception`` in agent code does not swallow it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tools import ToolCall


class AgentError(Exception):
    """The base of the SDK's errors. Raise it (or ``AgentError("...")``)
    to end a turn with exactly this message."""


class HostError(AgentError):
    """The host refused an effect (a message, a tool call, a history read...).

    ``kind`` is ``"invalid_order"`` (the effect breaks the journal's order
    rules), ``"limit"`` (a size or count limit was reached), ``"closed"``
    (the session has ended or the turn is suspended) or ``"unavailable"``
    (the host could not record it). The turn usually cannot go on.
    """

    _WORDS = {
        "invalid_order": "invalid order",
        "limit": "limit reached",
        "closed": "closed",
        "unavailable": "unavailable",
    }

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message
        words = self._WORDS.get(kind, kind)
        super().__init__(f"the host refused an effect: {words}: {message}")


class BadInput(AgentError):
    """The input (or a tool's arguments) is not what the agent expects."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"bad input: {message}")


class ToolApprovalRequired(BaseException):
    """A gated tool call now waits for a human decision: the turn is suspended.

    :meth:`Turn.run_tools` raises it. Let it propagate: the SDK ends the
    turn without an error, and the agent resumes in a new turn whose
    ``decision`` is set, where the SDK runs the suspended step before
    ``handle`` is called. Every further effect of this turn is refused.
    """

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        super().__init__(f"tool call {call.id or '?'} ({call.name}) waits for approval")
