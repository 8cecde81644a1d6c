"""JSON text as the SDK writes it: compact, keys sorted (as the Rust SDK's
``serde_json`` writes a value), non-ASCII kept; dataclasses and enums
written as their fields and values."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> str:
    """``value`` as compact JSON text with sorted keys."""
    return json.dumps(
        value,
        separators=(",", ":"),
        sort_keys=True,
        ensure_ascii=False,
        allow_nan=False,
        default=_default,
    )


def to_json_value(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, strings, numbers...)."""
    return json.loads(dumps(value))
