"""The model's conversation, rebuilt from the session's journal each time
the model is called: user inputs, the assistant's messages, its tool calls
(one step's ``TOOL_CALL``\\ s become one assistant message with
``tool_calls``) and their results (``role: tool``). Nothing else is kept.
The messages are the chat completions API's JSON objects."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List

from .. import journal
from .._json import dumps
from ..history import Event
from ..turn import input_text

NO_RESULT = "no result: the turn ended before this call ran"
"""What the model is told about a call that never got a result (its turn
failed, or handed over more gated calls than one step may hold)."""

Message = Dict[str, Any]


def _arguments_text(arguments: Any) -> str:
    """Arguments as the model is shown them: a string is the model's own
    text (kept as is when it was not JSON), anything else its JSON text."""
    return arguments if isinstance(arguments, str) else dumps(arguments)


def _result_content(status: str, output: Any) -> str:
    text = output if isinstance(output, str) else dumps(output)
    if status == "ok":
        return text
    if status == "error":
        return f"error: {text}"
    if status == "denied":
        return f"denied: a human reviewer denied this call, so it did not run ({text})"
    return f"{status}: {text}"


class _Builder:
    def __init__(self) -> None:
        self.messages: List[Message] = []
        # The last message is an assistant message of the current model
        # round: tool calls that follow belong to it.
        self.assistant_open = False
        # Calls of the last tool-call message that have no result yet, in order.
        self.pending: List[str] = []

    def settle(self) -> None:
        """Before a message other than a tool result: every call still
        without a result gets one, so the conversation stays valid."""
        for call_id in self.pending:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": NO_RESULT})
        self.pending = []

    def push(self, message: Message) -> None:
        self.settle()
        self.assistant_open = message["role"] == "assistant"
        self.messages.append(message)

    def event(self, event: Event) -> None:
        payload = event.payload if isinstance(event.payload, dict) else {}
        kind = event.event_type
        if kind == journal.TURN_STARTED:
            self.assistant_open = False
            value = payload.get("input")
            reason = payload.get("reason")
            is_input = isinstance(reason, dict) and reason.get("kind") == "input"
            # A text input has its user message next; other inputs only live here.
            if is_input and value is not None and input_text(value) is None:
                self.push({"role": "user", "content": dumps(value)})
        elif kind == journal.MESSAGE_END:
            text = payload.get("text")
            text = text if isinstance(text, str) else ""
            role = payload.get("role")
            if role == "user":
                self.push({"role": "user", "content": text})
            elif role == "assistant" and text:
                self.push({"role": "assistant", "content": text})
        elif kind == journal.TOOL_CALL:
            call_id, name = payload.get("tool_call_id"), payload.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                return
            if not self.assistant_open:
                self.push({"role": "assistant", "content": None})
            last = self.messages[-1]
            last.setdefault("tool_calls", []).append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": _arguments_text(payload.get("arguments"))},
                }
            )
            self.pending.append(call_id)
        elif kind == journal.TOOL_RESULT:
            self.assistant_open = False
            call_id = payload.get("tool_call_id")
            # Only a call still waiting (its message is the last non-tool one).
            if isinstance(call_id, str) and call_id in self.pending:
                self.pending.remove(call_id)
                status = payload.get("status")
                status = status if isinstance(status, str) else "ok"
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": _result_content(status, payload.get("output")),
                    }
                )
        # Lifecycle events (approvals, HTTP_REQUEST, ...) and types this SDK
        # does not know say nothing to the model.


def rebuild(system: str, events: Iterable[Event]) -> List[Message]:
    """The conversation for the model: ``system`` (if not empty), then what
    the journal ``events`` hold."""
    builder = _Builder()
    if system:
        builder.messages.append({"role": "system", "content": system})
    for event in events:
        builder.event(event)
    builder.settle()
    return builder.messages
