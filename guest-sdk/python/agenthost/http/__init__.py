"""Outbound HTTP for agents: :class:`Request`, :class:`Response`,
:func:`send` and :func:`send_events` (a Server-Sent Events response handed
over event by event), with errors that say when the host refused a request.

Requests go through ``wasi:http/outgoing-handler``; the host lets them
through only to the origins on the deployment's outbound allowlist
(``[outbound] allow`` in ``agenthost.toml``) and journals each one
(``HTTP_REQUEST`` / ``HTTP_RESPONSE``). The calls block until the response
has arrived; the turn's wall-clock limit still applies.

::

    from agenthost import http

    response = http.send(http.Request.get("https://api.example.com/status"))
    if response.status == 200:
        print(response.text())
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple
from urllib.parse import urlsplit

from .._json import dumps
from ..errors import AgentError
from .sse import SseEvent

__all__ = [
    "AddressProhibited",
    "HttpError",
    "InvalidRequest",
    "Request",
    "RequestDenied",
    "RequestFailed",
    "Response",
    "SseEvent",
    "send",
    "send_events",
]


class HttpError(AgentError):
    """Why an HTTP request failed. A response with an error status (4xx,
    5xx) is not an ``HttpError``: it is a :class:`Response`."""


class RequestDenied(HttpError):
    """The host refused the request: ``origin`` is not on the deployment's
    outbound allowlist."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        super().__init__(
            f"the host refused the request to {origin}: it is not on this deployment's "
            "outbound allowlist ([outbound] allow in agenthost.toml)"
        )


class AddressProhibited(HttpError):
    """The host refused to connect to the address ``origin`` resolved to (a
    private or loopback address, which deployments may not reach unless the
    server allows it)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        super().__init__(
            f"the host refused to connect to {origin}: it resolves to a private or "
            "loopback address, which this server does not let agents reach"
        )


class InvalidRequest(HttpError):
    """The request cannot be sent as built (a URL that is not absolute
    ``http(s)``, an invalid header or method...)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"invalid HTTP request: {message}")


class RequestFailed(HttpError):
    """The exchange failed: DNS, connection, TLS, a timeout, a response cut
    off, an event stream that is not UTF-8..."""

    def __init__(self, origin: str, message: str) -> None:
        self.origin = origin
        self.message = message
        super().__init__(f"the request to {origin} failed: {message}")


@dataclass
class Request:
    """An HTTP request to send with :func:`send` or :func:`send_events`."""

    method: str
    url: str
    """An absolute ``http://`` or ``https://`` URL."""
    headers: List[Tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @classmethod
    def get(cls, url: str) -> "Request":
        """A ``GET`` request to ``url``."""
        return cls("GET", url)

    @classmethod
    def post(cls, url: str) -> "Request":
        """A ``POST`` request to ``url``."""
        return cls("POST", url)

    def header(self, name: str, value: str) -> "Request":
        """Adds a header (names are case-insensitive; a name may repeat); returns the request."""
        self.headers.append((name, value))
        return self

    def with_body(self, body: bytes) -> "Request":
        """Sets the body; returns the request."""
        self.body = bytes(body)
        return self

    def json(self, value: Any) -> "Request":
        """Sets the body to ``value`` as JSON and the ``content-type`` header
        to ``application/json``; returns the request."""
        try:
            body = dumps(value).encode()
        except (TypeError, ValueError) as error:
            raise AgentError(f"cannot encode the request body as JSON: {error}") from None
        self.headers.append(("content-type", "application/json"))
        self.body = body
        return self


@dataclass
class Response:
    """An HTTP response: its status, headers (names in lowercase) and (for
    :func:`send`, or a non-2xx status in :func:`send_events`) its body."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes = b""

    @property
    def is_success(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (case-insensitive), if any."""
        name = name.lower()
        return next((v for (n, v) in self.headers if n.lower() == name), None)

    def text(self) -> str:
        """The body as text (invalid UTF-8 replaced with U+FFFD)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        try:
            return json.loads(self.body)
        except ValueError as error:
            raise AgentError(f"the response body is not the JSON expected: {error}") from None


def origin(url: str) -> str:
    """``scheme://host[:port]`` of an absolute ``http(s)`` URL (the port only
    when the URL names one), as the outbound allowlist spells origins."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise InvalidRequest(f"`{url}` is not a URL: {error}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidRequest(f"`{url}` is not an absolute http:// or https:// URL")
    host = (parts.hostname or "").lower()
    if not host:
        raise InvalidRequest(f"`{url}` has no host")
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}" if port is not None else f"{scheme}://{host}"


def send(request: Request) -> Response:
    """Sends ``request`` and returns the response with its whole body.

    Raises :class:`HttpError` when the request cannot be made; any status,
    4xx and 5xx included, is a :class:`Response`.
    """
    return _wasi().send(request, origin(request.url))


def send_events(request: Request, on_event: Callable[[SseEvent], None]) -> Response:
    """Sends ``request`` and reads the response as Server-Sent Events: for a
    2xx status, each event that carries data is handed to ``on_event`` as
    soon as it has arrived, and the returned :class:`Response` has an empty
    body; for any other status the body is read whole and ``on_event`` is
    never called. An exception from ``on_event`` stops reading and is
    raised as is.

    Raises :class:`HttpError` when the request cannot be made or the stream
    breaks off or is not UTF-8. Do not call :func:`send` or
    :func:`send_events` from inside ``on_event``.
    """
    return _wasi().send_events(request, origin(request.url), on_event)


# The wasi:http side is imported now, at build time: a component has no
# files to import a module from once it runs.
try:
    from . import _transport
except ModuleNotFoundError as error:  # outside a component (an editor, the unit tests)
    if not (error.name or "").startswith(("wit_world", "componentize_py_types")):
        raise
    _transport = None  # type: ignore[assignment]


def _wasi():
    if _transport is None:
        raise RuntimeError("outbound HTTP works only inside an agent component (built by `agenthost deploy`)")
    return _transport
