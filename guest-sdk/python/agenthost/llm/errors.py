"""What can go wrong when calling the model (:class:`LlmError` and its
cases), and why a model stopped (``finish_reason``). The messages are the
Rust SDK's, word for word."""

from __future__ import annotations

from ..errors import AgentError

STOP = "stop"
TOOL_CALLS = "tool_calls"
LENGTH = "length"
CONTENT_FILTER = "content_filter"


def parse_finish_reason(value: str) -> str:
    """The wire value, with the older ``function_call`` read as ``tool_calls``."""
    return TOOL_CALLS if value == "function_call" else value


class LlmError(AgentError):
    """Why calling the model failed. Raised from a turn, it ends the turn
    with a TURN_ERROR carrying its text."""


class ConfigError(LlmError):
    """The configuration is missing or invalid (an environment variable...)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"cannot call the model: {message}")


class KeyRefused(LlmError):
    """The provider refused the API key (HTTP 401 or 403)."""

    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(
            f"the model provider refused the API key (HTTP {status}): {message}; "
            "check the OPENAI_API_KEY secret (PUT /secrets/OPENAI_API_KEY)"
        )


class RateLimited(LlmError):
    """The provider kept answering 429 Too Many Requests."""

    def __init__(self, attempts: int, message: str) -> None:
        self.attempts, self.message = attempts, message
        super().__init__(
            f"the model provider is rate limiting this agent (HTTP 429 to each of "
            f"{attempts} attempts): {message}"
        )


class ProviderError(LlmError):
    """The provider answered with another error status (5xx, 400, 404...)."""

    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(f"the model provider answered HTTP {status}: {message}")


class StreamError(LlmError):
    """The provider reported an error inside its response stream."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"the model provider reported an error in its response stream: {message}")


class MalformedStream(LlmError):
    """The response stream is not what an OpenAI-compatible API sends."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"the model's response stream is malformed: {message}")


class Stopped(LlmError):
    """The model stopped without a usable answer (``length``, ``content_filter``)."""

    def __init__(self, finish_reason: str) -> None:
        self.finish_reason = finish_reason
        if finish_reason == LENGTH:
            text = (
                "the model's answer was cut off: it reached its output token limit "
                "(finish_reason `length`)"
            )
        elif finish_reason == CONTENT_FILTER:
            text = (
                "the provider's content filter stopped the model's answer "
                "(finish_reason `content_filter`)"
            )
        else:
            text = f"the model stopped without an answer (finish_reason `{finish_reason}`)"
        super().__init__(text)


class DeclaredModelFailed(LlmError):
    """A declared model (``[llm.<alias>]``) failed: every alias tried, or
    one that failed after its first token (the host's words)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"the declared model failed: {message}")


class TooManyRounds(LlmError):
    """The model still asked for tools after ``max_rounds`` rounds."""

    def __init__(self, max_rounds: int) -> None:
        self.max_rounds = max_rounds
        super().__init__(
            f"the model did not give a final answer within {max_rounds} rounds of tool calls "
            "(ChatLoop.max_rounds)"
        )
