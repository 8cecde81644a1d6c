"""Server-Sent Events decoding for :func:`agenthost.http.send_events`:
byte chunks split anywhere in, events that carry data out (the HTML
standard's rules: ``\\n``, ``\\r\\n`` or ``\\r`` line ends, ``data:``
lines joined with ``\\n``, comments and blocks without data skipped)."""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class SseEvent:
    """One Server-Sent Event with data."""

    event: Optional[str]
    """The ``event:`` field, if the block had one."""
    data: str
    """The ``data:`` lines, joined with ``\\n``."""
    id: Optional[str]
    """The ``id:`` field, if the block had one."""


class SseDecoder:
    """Decodes a stream of byte chunks into events; ``feed`` returns the
    events each chunk completes. Raises ``UnicodeDecodeError`` on bytes
    that are not UTF-8. An unfinished last block is dropped."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._line = ""
        self._after_cr = False
        self._event: Optional[str] = None
        self._data: List[str] = []
        self._has_data = False
        self._id: Optional[str] = None
        self._first = True

    def feed(self, chunk: bytes) -> List[SseEvent]:
        text = self._text.decode(chunk)
        if self._first and text:
            self._first = False
            if text.startswith("\ufeff"):
                text = text[1:]
        events: List[SseEvent] = []
        start = 0
        i = 0
        n = len(text)
        while i < n:
            ch = text[i]
            if ch == "\n" and self._after_cr:
                # The \n of a \r\n whose \r ended the line already.
                self._after_cr = False
                i += 1
                start = i
                continue
            self._after_cr = False
            if ch == "\r" or ch == "\n":
                self._line += text[start:i]
                self._end_line(events)
                self._line = ""
                self._after_cr = ch == "\r"
                i += 1
                start = i
                continue
            i += 1
        self._line += text[start:]
        return events

    def _end_line(self, events: List[SseEvent]) -> None:
        line = self._line
        if line == "":
            if self._has_data:
                events.append(SseEvent(self._event, "\n".join(self._data), self._id))
            self._event, self._data, self._has_data, self._id = None, [], False, None
            return
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        # `retry` and unknown fields carry nothing to hand over.
