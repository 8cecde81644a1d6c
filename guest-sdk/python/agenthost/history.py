"""The session's journal as the agent reads it: :class:`History` pages
through ``read-history``; :class:`Event` and :class:`ChatMessage` are what
it yields; :class:`EndUser` is who the session serves, from its first
event."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

from . import _host, journal
from .errors import AgentError

PAGE_SIZE = 256
"""How many events :class:`History` asks for per page (the host may cap it lower)."""


@dataclass(frozen=True)
class ChatMessage:
    """A finished message of the transcript (from a MESSAGE_END event)."""

    role: str
    """``"user"`` (the client's text inputs), ``"assistant"`` (the agent), or a role this SDK does not know."""
    text: str


@dataclass(frozen=True)
class Event:
    """One journal event."""

    seq: int
    """Its position in the session's journal (increasing)."""
    event_type: str
    """``SESSION_CREATED``, ``MESSAGE_END``, ``TOOL_CALL``, ... (docs/events.md)."""
    payload: Any
    """The payload, as JSON data."""

    def chat_message(self) -> Optional[ChatMessage]:
        """The finished message this event carries, if it is a MESSAGE_END."""
        if self.event_type != journal.MESSAGE_END or not isinstance(self.payload, dict):
            return None
        role, text = self.payload.get("role"), self.payload.get("text")
        if not isinstance(role, str) or not isinstance(text, str):
            return None
        return ChatMessage(role, text)


@dataclass(frozen=True)
class EndUser:
    """The end user a session belongs to (docs/end-users.md): the person
    who created it with an end-user token."""

    id: str
    """Their id in the app (the token's user, or its ``sub``)."""
    claims: Dict[str, Any]
    """The claims of their token that the app's manifest lists in
    ``[end_users] claims`` (the others never reach the agent); empty when it
    lists none."""


Page = Tuple[List[Event], Optional[int]]


def _parse(seq: int, event_type: str, payload: str) -> Event:
    try:
        return Event(seq, event_type, json.loads(payload))
    except ValueError as error:
        raise AgentError(
            f"the host sent event {seq} with a payload that is not JSON: {error}"
        ) from None


def read_from_host(after: Optional[int], limit: int) -> Page:
    """One page from the host, each payload parsed."""
    events, next_after = _host.read_history(after, limit)
    return [_parse(*e) for e in events], next_after


class History:
    """The session's journal, oldest first, read page by page as it is
    iterated. It includes this turn's own events so far (its TURN_STARTED,
    the input's user message, and whatever the agent has written).

    Iterating raises the host's error (a :class:`HostError`) if a page
    cannot be read.
    """

    def __init__(self, read: Callable[[Optional[int], int], Page] = read_from_host) -> None:
        self._read = read
        self._after: Optional[int] = None
        self._buffer: Deque[Event] = deque()
        self._done = False

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while not self._buffer and not self._done:
            try:
                events, next_after = self._read(self._after, PAGE_SIZE)
            except BaseException:
                self._done = True
                raise
            # Stop on the last page, and on a host that makes no progress.
            progress = next_after is not None and (self._after is None or next_after > self._after)
            self._done = not progress or not events
            self._after = next_after
            self._buffer.extend(events)
        if not self._buffer:
            raise StopIteration
        return self._buffer.popleft()

    def messages(self) -> List[ChatMessage]:
        """The transcript: every finished message (MESSAGE_END), oldest first."""
        return [m for m in (e.chat_message() for e in self) if m is not None]


def read_end_user(read: Callable[[Optional[int], int], Page] = read_from_host) -> Optional[EndUser]:
    """The end user of the session's first event (SESSION_CREATED), read
    with one ``read-history`` call; ``None`` when the session was created
    with an API key."""
    events, _ = read(None, 1)
    if not events:
        raise AgentError("the session's journal has no SESSION_CREATED event")
    first = events[0]
    if first.event_type != journal.SESSION_CREATED or not isinstance(first.payload, dict):
        raise AgentError(f"the session's journal opens with {first.event_type} instead of SESSION_CREATED")
    user = first.payload.get("end_user")
    if user is None:
        return None
    claims = user.get("claims") if isinstance(user, dict) else None
    if claims is None:
        claims = {}
    if not isinstance(user, dict) or not isinstance(user.get("id"), str) or not isinstance(claims, dict):
        raise AgentError(f"SESSION_CREATED has a malformed end_user: {user!r}")
    return EndUser(user["id"], claims)
