"""Calling the chat completions endpoint: the request body, one streamed
exchange, the retries on 429, and the provider's errors in words."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .. import http
from ..tools import Tool
from .config import ModelConfig
from .errors import KeyRefused, MalformedStream, ProviderError, RateLimited
from .stream import Assembler, Completion

MAX_ATTEMPTS = 5
"""At most this many requests per model call (the first and its retries)."""
MAX_BACKOFF = 30.0
"""At most this many seconds of waiting between retries, in total, per model call."""
FIRST_BACKOFF = 1.0
"""The first wait when the provider gives no ``Retry-After``; then doubled."""


def request_body(config: ModelConfig, messages: List[Dict[str, Any]], tools: Iterable[Tool]) -> Dict[str, Any]:
    """The JSON body of a streamed chat completions request."""
    body: Dict[str, Any] = {
        "model": config.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    specs = offered_tools(tools)
    if specs:
        body["tools"] = specs
    return body


def offered_tools(tools: Iterable[Tool]) -> List[Dict[str, Any]]:
    """The tools as the model is offered them (OpenAI function tools)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def next_wait(attempt: int, retry_after: Optional[str], waited: float) -> Tuple[Optional[float], str]:
    """How long to wait before attempt ``attempt + 1``, after ``waited``
    seconds so far: the provider's ``Retry-After`` seconds if it sent them,
    else 1 s, 2 s, 4 s... Returns ``(None, why)`` when not to retry."""
    if attempt >= MAX_ATTEMPTS:
        return None, f"gave up after {attempt} attempts"
    seconds: Optional[float] = None
    if retry_after is not None and retry_after.strip().isdigit():
        seconds = float(int(retry_after.strip()))
    wait = seconds if seconds is not None else FIRST_BACKOFF * 2 ** (attempt - 1)
    if waited + wait > MAX_BACKOFF:
        return None, (
            f"waiting {int(wait)} s more would exceed the {int(MAX_BACKOFF)} s retry budget"
        )
    return wait, ""


def provider_message(response: http.Response) -> str:
    """The provider's own words: ``error.message`` of an OpenAI-style JSON
    error body, else the body's text (shortened), else the status alone."""
    try:
        body = json.loads(response.body)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
    text = response.text().strip()
    if not text:
        return "(no message)"
    encoded = text.encode()
    if len(encoded) <= 500:
        return text
    return encoded[:500].decode("utf-8", errors="ignore") + "…"


def complete(config: ModelConfig, body: Dict[str, Any], on_text: Callable[[str], None]) -> Completion:
    """Calls the model with ``body``, handing each piece of text to
    ``on_text`` as it arrives, and retrying (only) on 429."""
    request = http.Request.post(config.completions_url).header("accept", "text/event-stream").json(body)
    if config.api_key:
        request.header("authorization", f"Bearer {config.api_key}")
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        assembler = Assembler()

        def on_event(event: http.SseEvent) -> None:
            text = assembler.feed(event.data)
            if text:
                on_text(text)

        response = http.send_events(request, on_event)
        if response.is_success:
            return _finish(assembler, response)
        status = response.status
        message = provider_message(response)
        if status in (401, 403):
            raise KeyRefused(status, message)
        if status == 429:
            wait, why = next_wait(attempt, response.header("retry-after"), waited)
            if wait is not None:
                time.sleep(wait)
                waited += wait
                continue
            raise RateLimited(attempt, f"{message} ({why})")
        raise ProviderError(status, message)


def _finish(assembler: Assembler, response: http.Response) -> Completion:
    """The completion of a 2xx response; a malformed one that was not even
    declared as an event stream says what it was instead."""
    try:
        return assembler.finish()
    except MalformedStream as error:
        kind = (response.header("content-type") or "").strip().lower()
        if not kind.startswith("text/event-stream"):
            raise MalformedStream(f"{error.message} (the response's content-type is `{kind}`)") from None
        raise
