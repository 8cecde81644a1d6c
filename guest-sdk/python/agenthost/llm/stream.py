"""Assembling a streamed chat completion: :class:`Assembler` takes the
``data:`` of each Server-Sent Event and yields the text deltas as they
come, then the whole :class:`Completion` (text, tool calls put together
from their fragments, finish reason, usage)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .errors import STOP, TOOL_CALLS, MalformedStream, StreamError, parse_finish_reason

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass
class ModelCall:
    """A tool call the model asked for."""

    id: Optional[str]
    """The model's id for the call, if it sent one (the SDK journals its own)."""
    name: str
    arguments: str
    """The arguments as the model wrote them (JSON text, unchecked)."""


@dataclass
class Completion:
    """One model response, put together."""

    text: str
    tool_calls: List[ModelCall]
    finish_reason: str
    usage: Optional[Tuple[int, int]]
    """``(prompt_tokens, completion_tokens)`` from the usage chunk, if any."""


def _excerpt(data: str) -> str:
    return data[:200] + ("…" if len(data) > 200 else "")


@dataclass
class _Partial:
    id: Optional[str] = None
    name: str = ""
    arguments: str = ""


@dataclass
class Assembler:
    """Puts a streamed chat completion together, one ``data:`` payload at a time."""

    text: str = ""
    calls: Dict[int, _Partial] = field(default_factory=dict)
    finish_reason: Optional[str] = None
    usage: Optional[Tuple[int, int]] = None
    done: bool = False
    chunks: int = 0

    def feed(self, data: str) -> str:
        """Feeds one event's data. Returns the text the model added (often empty)."""
        if self.done:
            return ""  # nothing is expected after [DONE]
        if data.strip() == "[DONE]":
            self.done = True
            return ""
        self.chunks += 1
        try:
            chunk = json.loads(data)
        except ValueError as error:
            raise MalformedStream(f"chunk {self.chunks} is not JSON ({error}): {_excerpt(data)}") from None
        if not isinstance(chunk, dict):
            raise MalformedStream(f"chunk {self.chunks} is not a JSON object: {_excerpt(data)}")
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            if not isinstance(message, str):
                message = json.dumps(error, separators=(",", ":"), sort_keys=True)
            raise StreamError(message)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = (_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))
        choices = chunk.get("choices")
        if choices is None:
            return ""
        if not isinstance(choices, list):
            raise MalformedStream(f"`choices` of chunk {self.chunks} is not an array: {_excerpt(data)}")
        # One completion was asked for (n = 1): its choice has index 0.
        choice = next(
            (c for c in choices if isinstance(c, dict) and _index(c.get("index"), 0) == 0), None
        )
        if choice is None:
            return ""
        added = ""
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        for name in ("content", "refusal"):
            piece = delta.get(name)
            if isinstance(piece, str):
                added += piece
        fragments = delta.get("tool_calls")
        if isinstance(fragments, list):
            for fragment in fragments:
                self._fragment(fragment)
        elif isinstance(delta.get("function_call"), dict):
            # The pre-tools API: one call, in `function_call`.
            self._fragment({"index": 0, "function": delta["function_call"]})
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            self.finish_reason = reason
        self.text += added
        return added

    def _fragment(self, fragment: Any) -> None:
        """One element of ``delta.tool_calls``: the first fragment of a call
        brings its id and name, the next ones pieces of its arguments."""
        if not isinstance(fragment, dict):
            raise MalformedStream(f"a tool call fragment in chunk {self.chunks} is not an object: {fragment}")
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) and fragment.get("id") else None
        index = _index(fragment.get("index"), None)
        if index is None:
            # Some servers leave `index` out: a new id starts a new call.
            last = max(self.calls) if self.calls else None
            if last is None:
                index = 0
            elif call_id is None or self.calls[last].id == call_id:
                index = last
            else:
                index = last + 1
        partial = self.calls.setdefault(index, _Partial())
        if call_id is not None and partial.id is None:
            partial.id = call_id
        function = fragment.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and not partial.name:
                partial.name = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                partial.arguments += arguments

    def finish(self) -> Completion:
        """The completion, once the stream has ended."""
        if self.chunks == 0 and not self.done:
            raise MalformedStream(
                "no `data:` event arrived (an OpenAI-compatible stream sends "
                '`data: {"choices":[...]}` events, then `data: [DONE]`)'
            )
        if self.finish_reason is not None:
            finish_reason = parse_finish_reason(self.finish_reason)
        elif self.done:
            # [DONE] without a finish_reason: go by what arrived.
            finish_reason = TOOL_CALLS if self.calls else STOP
        else:
            raise MalformedStream(
                "the stream ended before the model finished (no finish_reason, no [DONE])"
            )
        calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.name:
                raise MalformedStream(f"tool call {index} has no function name")
            if not _TOOL_NAME.match(call.name):
                raise MalformedStream(
                    f"tool call {index} names `{_excerpt(call.name)}`, which is not a tool name "
                    "(1 to 64 letters, digits, _ or -)"
                )
            calls.append(ModelCall(call.id, call.name, call.arguments))
        return Completion(self.text, calls, finish_reason, self.usage)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _index(value: Any, default: Optional[int]) -> Optional[int]:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default
