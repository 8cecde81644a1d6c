"""Declared models: the manifest's ``[llm.<alias>]`` models, which the host
calls with their keys (the agent never sees a key). :func:`declared_models`
lists the aliases; :func:`complete_declared` asks one for a completion, and
:class:`~agenthost.llm.ChatLoop` uses it when any model is declared.

The host streams the model's text straight into the turn's assistant
message (``MESSAGE_START`` / ``MESSAGE_DELTA`` / ``MESSAGE_END``): the
agent must not write it again. It journals each request (``LLM_CALL``,
``LLM_RESULT``) and fails over to the alias's ``fallbacks`` before the
first token (docs/llm.md).

::

    from agenthost.llm import complete_declared

    done = complete_declared("main", [{"role": "user", "content": "Hi"}])
    print(done.text, done.served_by, done.output_tokens)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional

from .. import _host
from .errors import ConfigError, DeclaredModelFailed
from .stream import ModelCall


@dataclass
class DeclaredCompletion:
    """What a declared model answered. Its text is already in the turn's
    journal (the message ``message_id``)."""

    text: str
    """The whole text, already streamed by the host (do not write it again)."""
    tool_calls: List[ModelCall] = field(default_factory=list)
    """The calls the model asked for: hand them to the host as the step's calls."""
    finish_reason: str = "stop"
    """``stop``, ``length``, ``tool_calls``, ``content_filter``, ..."""
    served_by: str = ""
    """The alias that answered (the asked one, or a fallback)."""
    input_tokens: int = 0
    output_tokens: int = 0
    message_id: Optional[str] = None
    """The message the text went to; ``None`` when the model wrote no text."""


def declared_models() -> List[str]:
    """The aliases of the manifest's ``[llm.<alias>]`` models, in name
    order (empty when it declares none)."""
    return _host.llm_aliases()


def default_alias() -> Optional[str]:
    """The alias a ChatLoop uses when none is set: ``main`` if declared,
    else the first declared; ``None`` when none is declared."""
    aliases = declared_models()
    if "main" in aliases:
        return "main"
    return aliases[0] if aliases else None


def complete_declared(
    alias: str,
    messages: List[Dict[str, Any]],
    tools: Iterable[Dict[str, Any]] = (),
    parameters: Optional[Dict[str, Any]] = None,
) -> DeclaredCompletion:
    """One completion of ``alias`` through the host.

    ``messages`` is the conversation as OpenAI chat messages; ``tools``
    OpenAI function tools (``{"type": "function", "function": {...}}``);
    ``parameters`` further request fields (``temperature``, ...; the host
    sets ``model``, ``stream``, ``messages``, ``tools`` and the output cap).

    Raises :class:`ConfigError` for an unknown alias or a malformed request,
    :class:`DeclaredModelFailed` when the model failed (the provider's
    words), and :class:`~agenthost.errors.HostError` when the host refused
    (kind ``closed``: the turn was suspended or closed by the host).
    """
    try:
        done = _host.llm_complete(
            alias,
            json.dumps(list(messages)),
            json.dumps(list(tools)),
            json.dumps(parameters or {}),
        )
    except _host.LlmRefused as refused:
        if refused.kind == "failed":
            raise DeclaredModelFailed(refused.message) from None
        raise ConfigError(refused.message) from None
    message_id, text, calls, finish_reason, served_by, input_tokens, output_tokens = done
    return DeclaredCompletion(
        text=text,
        tool_calls=[ModelCall(i, n, a) for (i, n, a) in calls],
        finish_reason=finish_reason,
        served_by=served_by,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        message_id=message_id,
    )
