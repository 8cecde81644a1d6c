"""Assistant messages: :class:`Message` streams one message (start, deltas,
end); :meth:`Turn.say` writes a whole one."""

from __future__ import annotations

from . import _host


class Message:
    """An open assistant message (MESSAGE_START has been written).

    Each :meth:`write` is one MESSAGE_DELTA, sent to clients as it is
    written; :meth:`finish` sends MESSAGE_END with the full text. Used as a
    context manager it finishes on leaving the block. A message dropped
    unfinished is finished too (ignoring errors), and one still open when
    the turn ends is closed by the host.
    """

    __slots__ = ("_id", "_open")

    def __init__(self, message_id: str) -> None:
        self._id = message_id
        self._open = True

    @property
    def id(self) -> str:
        """The message's id, as the host assigned it."""
        return self._id

    def write(self, text: str) -> None:
        """Appends ``text`` (one MESSAGE_DELTA; nothing for empty text)."""
        if text:
            _host.message_delta(self._id, text)

    def finish(self) -> None:
        """Closes the message (MESSAGE_END)."""
        if self._open:
            self._open = False
            _host.message_end(self._id)

    def __enter__(self) -> "Message":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.finish()
        else:
            self._finish_quietly()

    def _finish_quietly(self) -> None:
        if self._open:
            self._open = False
            try:
                _host.message_end(self._id)
            except Exception:
                pass  # the host has closed the turn anyway

    def __del__(self) -> None:
        self._finish_quietly()
