"""The ``wasi:http`` side of :func:`send` and :func:`send_events`: one
blocking exchange per request (the body written after the request is
handed over, the response read as it arrives), and the mapping of
``wasi:http`` error codes to :class:`HttpError`.

Resources are dropped children first (a stream before its body), as
``wasi:http`` requires.
"""

from __future__ import annotations

from typing import Callable, List, Tuple
from urllib.parse import urlsplit

from componentize_py_types import Err
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as http

from . import (
    AddressProhibited,
    HttpError,
    InvalidRequest,
    Request,
    RequestDenied,
    RequestFailed,
    Response,
)
from .sse import SseDecoder, SseEvent

CHUNK = 4096
"""Bytes per body write (``blocking-write-and-flush`` takes at most 4096)."""
READ = 64 * 1024
"""Bytes asked for per body read."""

_METHODS = {
    "GET": http.Method_Get,
    "HEAD": http.Method_Head,
    "POST": http.Method_Post,
    "PUT": http.Method_Put,
    "DELETE": http.Method_Delete,
    "CONNECT": http.Method_Connect,
    "OPTIONS": http.Method_Options,
    "TRACE": http.Method_Trace,
    "PATCH": http.Method_Patch,
}

_WORDS = {
    "DnsTimeout": "the DNS lookup timed out",
    "DestinationNotFound": "no such host",
    "DestinationUnavailable": "the server is unavailable",
    "ConnectionRefused": "the connection was refused",
    "ConnectionTerminated": "the connection was closed",
    "ConnectionTimeout": "the connection timed out",
    "ConnectionReadTimeout": "the server took too long to answer",
    "HttpResponseTimeout": "the server took too long to answer",
    "TlsProtocolError": "the TLS handshake failed",
    "TlsCertificateError": "the TLS handshake failed",
    "HttpResponseIncomplete": "the response was cut off",
}


def _refused(origin: str, code) -> HttpError:
    """An error code as an :class:`HttpError`, naming the host's refusals."""
    kind = type(code).__name__.replace("ErrorCode_", "")
    if kind == "HttpRequestDenied":
        return RequestDenied(origin)
    if kind == "DestinationIpProhibited":
        return AddressProhibited(origin)
    if kind == "DnsError":
        rcode = getattr(code.value, "rcode", None)
        return RequestFailed(origin, f"the DNS lookup failed ({rcode or 'no such host'})")
    if kind == "InternalError" and code.value:
        return RequestFailed(origin, code.value)
    return RequestFailed(origin, _WORDS.get(kind, kind))


def _stream_error(origin: str, error) -> HttpError:
    """A failed stream operation, with the HTTP error code behind it if any."""
    if isinstance(error, streams.StreamError_LastOperationFailed):
        with error.value as io_error:
            code = http.http_error_code(io_error)
            if code is not None:
                return _refused(origin, code)
            return RequestFailed(origin, io_error.to_debug_string())
    return RequestFailed(origin, "the response was cut off")


def _outgoing(request: Request) -> http.OutgoingRequest:
    parts = urlsplit(request.url)
    try:
        fields = http.Fields.from_list([(name.lower(), value.encode()) for (name, value) in request.headers])
    except Err as error:
        raise InvalidRequest(f"a header is not valid ({type(error.value).__name__.split('_')[-1]})") from None
    except UnicodeEncodeError as error:
        raise InvalidRequest(f"a header value is not text: {error}") from None
    outgoing = http.OutgoingRequest(fields)
    method = request.method.upper()
    wire_method = _METHODS[method]() if method in _METHODS else http.Method_Other(request.method)
    scheme = http.Scheme_Https() if parts.scheme.lower() == "https" else http.Scheme_Http()
    host = parts.netloc.rsplit("@", 1)[-1]
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    for setter, value, what in (
        (outgoing.set_method, wire_method, f"method `{request.method}`"),
        (outgoing.set_scheme, scheme, "scheme"),
        (outgoing.set_authority, host, f"authority `{host}`"),
        (outgoing.set_path_with_query, path, f"path `{path}`"),
    ):
        try:
            setter(value)
        except Err:
            raise InvalidRequest(f"the {what} is not valid") from None
    return outgoing


def _exchange(request: Request, origin: str) -> http.IncomingResponse:
    """Hands the request over, writes its body, and waits for the response's head."""
    outgoing = _outgoing(request)
    body = outgoing.body()
    try:
        future = outgoing_handler.handle(outgoing, None)
    except Err as error:
        body.__exit__(None, None, None)
        raise _refused(origin, error.value) from None
    with future:
        with body.write() as stream:
            data = request.body
            for start in range(0, len(data), CHUNK):
                try:
                    stream.blocking_write_and_flush(data[start : start + CHUNK])
                except Err:
                    break  # the exchange failed: the future says why
        try:
            http.OutgoingBody.finish(body, None)
        except Err:
            pass  # likewise
        with future.subscribe() as ready:
            ready.block()
        result = future.get()
    if result is None or isinstance(result, Err):
        raise RequestFailed(origin, "no response")
    inner = result.value
    if isinstance(inner, Err):
        raise _refused(origin, inner.value)
    return inner.value


def _head(response: http.IncomingResponse) -> Response:
    with response.headers() as fields:
        entries = fields.entries()
    headers: List[Tuple[str, str]] = [
        (name.lower(), value.decode("utf-8", errors="replace")) for (name, value) in entries
    ]
    return Response(status=response.status(), headers=headers)


def _read(response: http.IncomingResponse, origin: str, on_chunk: Callable[[bytes], None]) -> None:
    """Reads the body, handing over each chunk as it arrives."""
    with response.consume() as body:
        with body.stream() as stream:
            while True:
                try:
                    chunk = stream.blocking_read(READ)
                except Err as error:
                    if isinstance(error.value, streams.StreamError_Closed):
                        return
                    raise _stream_error(origin, error.value) from None
                if chunk:
                    on_chunk(chunk)


def send(request: Request, origin: str) -> Response:
    with _exchange(request, origin) as incoming:
        response = _head(incoming)
        chunks: List[bytes] = []
        _read(incoming, origin, chunks.append)
    response.body = b"".join(chunks)
    return response


def send_events(request: Request, origin: str, on_event: Callable[[SseEvent], None]) -> Response:
    with _exchange(request, origin) as incoming:
        response = _head(incoming)
        if not response.is_success:
            chunks: List[bytes] = []
            _read(incoming, origin, chunks.append)
            response.body = b"".join(chunks)
            return response
        decoder = SseDecoder()

        def on_chunk(chunk: bytes) -> None:
            try:
                events = decoder.feed(chunk)
            except UnicodeDecodeError as error:
                raise RequestFailed(origin, f"the event stream is malformed: {error}") from None
            for event in events:
                on_event(event)

        _read(incoming, origin, on_chunk)
    return response

