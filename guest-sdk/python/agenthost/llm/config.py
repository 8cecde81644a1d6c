"""``ModelConfig``: which OpenAI-compatible API to call, with which key and
model, read from the agent's environment (where the host puts the secrets
the manifest declares)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from .errors import ConfigError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The base URL used when ``OPENAI_BASE_URL`` is not set."""


@dataclass(frozen=True)
class ModelConfig:
    """Where and how to call the model."""

    model: str
    """The model's name, such as ``gpt-4o-mini``."""
    base_url: str = DEFAULT_BASE_URL
    """Requests go to ``{base_url}/chat/completions``; its origin must be on
    the deployment's outbound allowlist."""
    api_key: Optional[str] = None
    """Sent as ``Authorization: Bearer <key>`` when set."""

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "ModelConfig":
        """Reads ``OPENAI_BASE_URL`` (default :data:`DEFAULT_BASE_URL`),
        ``OPENAI_API_KEY`` (optional) and ``OPENAI_MODEL`` (required). Declare
        them in the manifest's ``[agent] secrets`` and set them with ``PUT
        /secrets/<NAME>``. Empty values count as unset."""
        env = os.environ if environ is None else environ
        return cls._from_lookup(env.get)

    @classmethod
    def _from_lookup(cls, get: Callable[[str], Optional[str]]) -> "ModelConfig":
        def value(name: str) -> Optional[str]:
            raw = get(name)
            raw = raw.strip() if raw is not None else None
            return raw or None

        model = value("OPENAI_MODEL")
        if model is None:
            raise ConfigError(
                "OPENAI_MODEL is not set: declare it in `[agent] secrets` of agenthost.toml "
                "and set it with PUT /secrets/OPENAI_MODEL"
            )
        return cls(
            model=model,
            base_url=value("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
            api_key=value("OPENAI_API_KEY"),
        )

    @property
    def completions_url(self) -> str:
        """``{base_url}/chat/completions``."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def __repr__(self) -> str:  # never shows the key
        key = "<set>" if self.api_key else None
        return f"ModelConfig(model={self.model!r}, base_url={self.base_url!r}, api_key={key!r})"
