"""A model loop for agents: :class:`ChatLoop` calls an OpenAI-compatible
chat completions API, streams the model's text into the session as an
assistant message, hands the tool calls it asks for to the host (so gated
ones wait for a human), runs the others, and calls the model again until
it answers.

::

    from agenthost import Agent, Turn
    from agenthost.llm import ChatLoop

    agent = Agent(routes=["/chat"])
    loop = ChatLoop("You are a helpful assistant.")

    @agent.handler
    def handle(turn: Turn) -> None:
        loop.run(turn)

The model is one the manifest declares, when it declares any
(``[llm.<alias>]``, docs/llm.md): the host holds its key, sends the
request, streams the text straight into the turn's message, journals
``LLM_CALL`` / ``LLM_RESULT`` and fails over to the alias's ``fallbacks``.
The loop uses the alias given as ``ChatLoop(alias=...)``, else ``main`` if
declared, else the first declared (:func:`declared_models`);
:func:`complete_declared` calls a declared model directly.

Otherwise the model is called over the agent's own outbound HTTP and
configured from the environment (:meth:`ModelConfig.from_env`): declare
``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL`` in the
manifest's ``[agent] secrets``, and put the API's origin in its
``[outbound] allow``.

Each call rebuilds the conversation from the session's journal (nothing
is kept anywhere else). Compatibility is claimed for the chunk shapes the
SDK's tests replay (those OpenAI documents: text deltas, tool-call
fragments keyed by ``index``, parallel calls, a usage-only last chunk,
``[DONE]``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Callable, List, Optional

from ..errors import HostError
from ..message import Message
from ..tools import ToolCall
from ..turn import Turn
from . import client, conversation
from .config import DEFAULT_BASE_URL, ModelConfig
from .declared import DeclaredCompletion, complete_declared, declared_models, default_alias
from .errors import (
    CONTENT_FILTER,
    LENGTH,
    ConfigError,
    DeclaredModelFailed,
    KeyRefused,
    LlmError,
    MalformedStream,
    ProviderError,
    RateLimited,
    Stopped,
    StreamError,
    TooManyRounds,
)
from .stream import Completion, ModelCall

__all__ = [
    "ChatLoop",
    "ConfigError",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_ROUNDS",
    "DeclaredCompletion",
    "DeclaredModelFailed",
    "KeyRefused",
    "LlmError",
    "MalformedStream",
    "ModelConfig",
    "ProviderError",
    "RateLimited",
    "Stopped",
    "StreamError",
    "TooManyRounds",
    "complete_declared",
    "declared_models",
]

DEFAULT_MAX_ROUNDS = 8
"""How many model calls a turn may make by default."""


class ChatLoop:
    """The model loop of a turn. Build it with a system prompt, then
    :meth:`run` it on each turn (a new input or a resumed one).

    A run:

    1. (on a turn resumed by an approval decision, the SDK has already run
       the suspended step before the handler was called: the approved call
       ran, a denied one was reported ``denied``);
    2. rebuilds the conversation from the journal and calls the model with
       the agent's tools;
    3. streams its text into one assistant message;
    4. if it asked for tools, hands the calls to the host in steps (each
       step holds at most one call known to be gated: its code flag or the
       operator's ``SERVICE_APPROVAL_POLICY``), runs them, and goes back to
       2; a gated call suspends the turn (:class:`ToolApprovalRequired`
       propagates and ends it cleanly), and the turn that resumes from the
       decision runs the loop again;
    5. ends when the model answers without tool calls.

    The model calls go to the declared model ``alias`` (``[llm.<alias>]``)
    through the host, else to ``main`` or the first declared model, else
    (none declared, or ``config`` given) over outbound HTTP. A declared
    model's text is streamed by the host, not written again by the loop; a
    ``closed`` host error from it means the host suspended the turn (a
    budget): the run returns quietly.

    Errors end the turn with a TURN_ERROR whose message says what
    happened: an :class:`LlmError` (the key refused, rate limited after
    retries, a provider error, a malformed stream, an answer cut off, more
    than ``max_rounds`` model calls, a declared model that failed:
    :class:`DeclaredModelFailed`, an unknown alias: :class:`ConfigError`)
    or an :class:`agenthost.http.HttpError` (the API's origin not on the
    outbound allowlist, a connection that failed).
    """

    def __init__(
        self,
        system_prompt: str = "",
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        config: Optional[ModelConfig] = None,
        alias: Optional[str] = None,
    ) -> None:
        self.system_prompt = system_prompt
        self.max_rounds = max(1, int(max_rounds))
        """At most this many model calls per turn; a model that still asks
        for tools in the last round ends the turn with :class:`TooManyRounds`."""
        self.config = config
        """Used instead of reading :meth:`ModelConfig.from_env` at each run."""
        self.alias = alias
        """The declared model (``[llm.<alias>]``) to call through the host
        instead of the default one."""

    def _route(self):
        """Where this run's model calls go: ``("declared", alias)`` or
        ``("outbound", config)``."""
        if self.config is not None:
            return "outbound", self.config
        alias = self.alias or default_alias()
        if alias is not None:
            return "declared", alias
        return "outbound", ModelConfig.from_env()

    def run(self, turn: Turn) -> None:
        """Runs the loop for this turn (see :class:`ChatLoop`)."""
        route, target = self._route()
        # The MCP servers' tools, offered beside the agent's own.
        mcp = turn.mcp_tools()
        tools = list(turn._tools.values()) + mcp
        policy = approval_policy()
        code_gated = {t.name for t in tools if t.needs_approval}

        def gated(name: str) -> bool:
            return name in policy or name in code_gated

        for _ in range(self.max_rounds):
            messages = conversation.rebuild(self.system_prompt, turn.history())
            if route == "declared":
                try:
                    declared = complete_declared(target, messages, client.offered_tools(tools))
                except HostError as error:
                    if error.kind == "closed":
                        # The host suspended the turn (a budget): nothing more to do.
                        return
                    raise
                completion = Completion(
                    declared.text,
                    declared.tool_calls,
                    declared.finish_reason,
                    (declared.input_tokens, declared.output_tokens),
                )
            else:
                config = target
                body = client.request_body(config, messages, tools)
                completion = _stream_reply(turn, config, body)
                if completion.usage is not None:
                    prompt, completion_tokens = completion.usage
                    print(
                        f"agenthost-sdk: model {config.model} used {prompt} prompt and "
                        f"{completion_tokens} completion tokens",
                        file=sys.stderr,
                    )
            if completion.finish_reason in (LENGTH, CONTENT_FILTER):
                raise Stopped(completion.finish_reason)
            if not completion.tool_calls:
                return
            reason = step_reason(completion.text, completion.tool_calls)
            calls = [to_tool_call(c) for c in completion.tool_calls]
            for step in steps(calls, gated):
                # A gated call suspends the turn here: ToolApprovalRequired ends it cleanly.
                turn.run_tools(step, reason)
        raise TooManyRounds(self.max_rounds)


def _stream_reply(turn: Turn, config: ModelConfig, body) -> Completion:
    """One model call, its text streamed into an assistant message (opened
    at the first text, so a reply with only tool calls writes no message)."""
    message: List[Message] = []

    def on_text(text: str) -> None:
        if not message:
            message.append(turn.message())
        message[0].write(text)

    completion = client.complete(config, body, on_text)
    if message:
        message[0].finish()
    return completion


def approval_policy() -> List[str]:
    """The tool names in the operator's ``SERVICE_APPROVAL_POLICY`` (a JSON
    array), which the host also gates."""
    try:
        policy = json.loads(os.environ.get("SERVICE_APPROVAL_POLICY", "[]"))
    except ValueError:
        return []
    return [p for p in policy if isinstance(p, str)] if isinstance(policy, list) else []


def to_tool_call(call: ModelCall) -> ToolCall:
    """A model's call as the SDK journals it: its own id (``call_<turn>_<n>``),
    and the arguments as JSON (``{}`` when empty; text that is not JSON
    kept as a string, which the tool reports as invalid)."""
    raw = call.arguments.strip()
    if not raw:
        return ToolCall(call.name, {})
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = call.arguments
    return ToolCall(call.name, arguments)


def step_reason(text: str, calls: List[ModelCall]) -> str:
    """What the human deciding on a gated call is shown: the model's own
    words before its calls (at most 1000 bytes), or which tools it asked for."""
    text = text.strip()
    if text:
        return text.encode()[:1000].decode("utf-8", errors="ignore")
    return "the model asked to call " + ", ".join(c.name for c in calls)


def steps(calls: List[ToolCall], gated: Callable[[str], bool]) -> List[List[ToolCall]]:
    """Splits one model reply's calls into steps, in order, so that no step
    holds two calls known to be gated (the host refuses such a step)."""
    result: List[List[ToolCall]] = []
    step_has_gated = False
    for call in calls:
        is_gated = gated(call.name)
        if result and not (is_gated and step_has_gated):
            result[-1].append(call)
        else:
            result.append([call])
            step_has_gated = False
        step_has_gated = step_has_gated or is_gated
    return result
