"""A tool's JSON Schema from its function's type hints, and its arguments
checked and converted back into those types.

Supported hints (stdlib ``typing`` and ``dataclasses`` only): ``str``,
``int``, ``float``, ``bool``, ``None``, ``Any``, ``list[T]``,
``tuple[T, ...]``, ``dict[str, T]``, ``Optional[T]`` / ``T | None``,
``Union[...]``, ``Literal[...]``, ``enum.Enum`` subclasses, dataclasses,
``TypedDict`` classes, and ``Annotated[T, "description"]``. A parameter
without a hint takes any JSON value. A parameter with a default is not
required. Parameter descriptions come from ``Annotated`` or from the
docstring's ``Args:`` section (or ``:param name:`` lines).
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import enum
import inspect
import re
import types
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["function_schema", "schema_of", "convert", "ArgumentError"]

_NONE = type(None)


class ArgumentError(ValueError):
    """Arguments that do not fit the tool's parameters."""


def _origin(hint: Any) -> Any:
    return typing.get_origin(hint)


def _is_union(hint: Any) -> bool:
    origin = _origin(hint)
    if origin is typing.Union:
        return True
    union_type = getattr(types, "UnionType", None)
    return union_type is not None and origin is union_type


def _is_typeddict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__total__")


def _hints(obj: Any) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception as error:  # NameError for an unresolved forward reference
        name = getattr(obj, "__qualname__", repr(obj))
        raise TypeError(f"cannot read the type hints of {name}: {error}") from None


def _json_literal(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def schema_of(hint: Any) -> Dict[str, Any]:
    """The JSON Schema of values of type ``hint``."""
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    if hint is _NONE or hint is None:
        return {"type": "null"}
    if hint is str:
        return {"type": "string"}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    origin = _origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = dict(schema_of(args[0]))
        for extra in args[1:]:
            if isinstance(extra, str):
                schema["description"] = extra
        return schema
    if _is_union(hint):
        members = [a for a in args if a is not _NONE]
        nullable = len(members) < len(args)
        if len(members) == 1:
            schema = dict(schema_of(members[0]))
            if nullable:
                kind = schema.get("type")
                if isinstance(kind, str) and "enum" not in schema:
                    schema["type"] = [kind, "null"]
                else:
                    schema = {"anyOf": [schema, {"type": "null"}]}
            return schema
        options = [schema_of(m) for m in members]
        if nullable:
            options.append({"type": "null"})
        return {"anyOf": options}
    if origin is typing.Literal:
        values = list(args)
        schema: Dict[str, Any] = {"enum": values}
        kind = _common_type(values)
        if kind:
            schema["type"] = kind
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        schema = {"enum": values}
        kind = _common_type(values)
        if kind:
            schema["type"] = kind
        return schema
    if hint is list or origin is list or _is_sequence(origin):
        schema = {"type": "array"}
        if args:
            schema["items"] = schema_of(args[0])
        return schema
    if hint is tuple or origin is tuple:
        schema = {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            schema["items"] = schema_of(args[0])
        elif args:
            schema["prefixItems"] = [schema_of(a) for a in args]
            schema["minItems"] = schema["maxItems"] = len(args)
        return schema
    if hint is dict or origin is dict or _is_mapping(origin):
        schema = {"type": "object"}
        if len(args) == 2:
            if args[0] is not str:
                raise TypeError(f"{hint}: JSON object keys are strings; use dict[str, ...]")
            schema["additionalProperties"] = schema_of(args[1])
        return schema
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = _hints(hint)
        properties = {}
        required = []
        for field in dataclasses.fields(hint):
            properties[field.name] = schema_of(hints.get(field.name, Any))
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                required.append(field.name)
        return _object(properties, required, _first_paragraph(hint.__doc__, hint))
    if _is_typeddict(hint):
        hints = _hints(hint)
        required_keys = getattr(hint, "__required_keys__", frozenset(hints))
        properties = {name: schema_of(h) for name, h in hints.items()}
        required = [name for name in hints if name in required_keys]
        return _object(properties, required, None)
    raise TypeError(f"no JSON Schema for the type {hint!r}")


def _is_sequence(origin: Any) -> bool:
    return origin in (abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection)


def _is_mapping(origin: Any) -> bool:
    return origin in (abc.Mapping, abc.MutableMapping)


def _common_type(values: List[Any]) -> Optional[str]:
    if values and all(isinstance(v, str) for v in values):
        return "string"
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "integer"
    return None


def _object(properties: Dict[str, Any], required: List[str], description: Optional[str]) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    if description:
        schema["description"] = description
    return schema


def _first_paragraph(doc: Optional[str], owner: Any = None) -> Optional[str]:
    if not doc:
        return None
    # A dataclass without a docstring gets its signature as __doc__: not a description.
    if owner is not None and dataclasses.is_dataclass(owner) and doc.startswith(owner.__name__ + "("):
        return None
    return _split_doc(doc)[0] or None


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
_PARAM_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def _split_doc(doc: str) -> Tuple[str, Dict[str, str]]:
    """A docstring's description (before its sections) and its parameter
    descriptions (Google ``Args:`` style or ``:param name:`` lines)."""
    lines = inspect.cleandoc(doc).splitlines()
    description: List[str] = []
    params: Dict[str, str] = {}
    section: Optional[str] = None
    current: Optional[str] = None
    indent: Optional[int] = None
    for line in lines:
        stripped = line.strip()
        heading = _SECTION.match(stripped)
        if heading and (len(line) - len(line.lstrip())) == 0:
            section = heading.group(1)
            current, indent = None, None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            section = ":param"
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if section is None:
            description.append(line)
            continue
        if section in ("Args", "Arguments", "Parameters", "Params"):
            if not stripped:
                current = None
                continue
            line_indent = len(line) - len(line.lstrip())
            match = _PARAM_LINE.match(stripped)
            if match and (indent is None or line_indent <= indent):
                indent = line_indent
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == ":param" and current is not None and stripped:
            params[current] = (params[current] + " " + stripped).strip()
    text = "\n".join(description).strip()
    return text, params


def function_schema(
    function: Callable[..., Any], is_turn: Callable[[str, Any], bool]
) -> Tuple[str, Dict[str, Any], List[str], Dict[str, Any], bool]:
    """``(description, parameters schema, turn parameters, hints, takes **kwargs)``
    of a tool function. ``is_turn(name, hint)`` says which parameters receive
    the turn instead of an argument."""
    signature = inspect.signature(function)
    hints = _hints(function)
    description, documented = _split_doc(function.__doc__ or "")
    properties: Dict[str, Any] = {}
    required: List[str] = []
    turn_params: List[str] = []
    arg_hints: Dict[str, Any] = {}
    var_keyword = False
    for name, parameter in signature.parameters.items():
        hint = hints.get(name, inspect.Parameter.empty)
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            var_keyword = True
            continue
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"tool {function.__name__}: *{name} cannot receive JSON arguments; name each parameter"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"tool {function.__name__}: parameter {name} is positional-only; arguments are passed by name"
            )
        if is_turn(name, hint):
            turn_params.append(name)
            continue
        try:
            schema = dict(schema_of(hint))
        except TypeError as error:
            raise TypeError(f"tool {function.__name__}, parameter {name}: {error}") from None
        if name in documented and "description" not in schema:
            schema["description"] = documented[name]
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        elif _json_literal(parameter.default):
            schema["default"] = parameter.default
        properties[name] = schema
        arg_hints[name] = hint
    parameters: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if not var_keyword:
        parameters["additionalProperties"] = False
    return description, parameters, turn_params, arg_hints, var_keyword


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _fail(path: str, message: str) -> ArgumentError:
    return ArgumentError(f"{path}: {message}" if path else message)


def convert(hint: Any, value: Any, path: str = "") -> Any:
    """``value`` (JSON data) checked against ``hint`` and converted into it
    (a dataclass, an enum member, a tuple...). Raises :class:`ArgumentError`."""
    if hint is inspect.Parameter.empty or hint is Any:
        return value
    if hint is _NONE or hint is None:
        if value is not None:
            raise _fail(path, f"invalid type: {_describe(value)}, expected null")
        return None
    if hint is str:
        if not isinstance(value, str):
            raise _fail(path, f"invalid type: {_describe(value)}, expected a string")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise _fail(path, f"invalid type: {_describe(value)}, expected a boolean")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(path, f"invalid type: {_describe(value)}, expected a number")
        return float(value)
    origin = _origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return convert(args[0], value, path)
    if _is_union(hint):
        if value is None and _NONE in args:
            return None
        errors = []
        for member in args:
            if member is _NONE:
                continue
            try:
                return convert(member, value, path)
            except ArgumentError as error:
                errors.append(str(error))
        if len(errors) == 1:
            raise ArgumentError(errors[0])
        raise _fail(path, f"{_describe(value)} fits none of the allowed types")
    if origin is typing.Literal:
        if value not in args or isinstance(value, bool) != any(isinstance(a, bool) and a == value for a in args):
            allowed = ", ".join(repr(a) for a in args)
            raise _fail(path, f"unknown value {_describe(value)}, expected one of {allowed}")
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        for member in hint:
            if member.value == value and type(member.value) is type(value):
                return member
        allowed = ", ".join(repr(m.value) for m in hint)
        raise _fail(path, f"unknown variant {_describe(value)}, expected one of {allowed}")
    if hint is list or origin is list or _is_sequence(origin):
        if not isinstance(value, list):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an array")
        item = args[0] if args else Any
        return [convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if hint is tuple or origin is tuple:
        if not isinstance(value, list):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an array")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise _fail(path, f"invalid length {len(value)}, expected {len(args)} items")
        if not args:
            return tuple(value)
        return tuple(convert(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if hint is dict or origin is dict or _is_mapping(origin):
        if not isinstance(value, dict):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an object")
        if len(args) == 2:
            return {k: convert(args[1], v, _join(path, k)) for k, v in value.items()}
        return dict(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an object")
        hints = _hints(hint)
        fields = {f.name: f for f in dataclasses.fields(hint)}
        return hint(**convert_fields(fields, hints, value, path))
    if _is_typeddict(hint):
        if not isinstance(value, dict):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an object")
        hints = _hints(hint)
        required = getattr(hint, "__required_keys__", frozenset(hints))
        for name in value:
            if name not in hints:
                raise _fail(path, f"unknown field `{name}`")
        for name in required:
            if name not in value:
                raise _fail(path, f"missing field `{name}`")
        return {k: convert(hints[k], v, _join(path, k)) for k, v in value.items()}
    raise _fail(path, f"cannot convert to {hint!r}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else f"`{key}`"


def convert_fields(fields: Dict[str, Any], hints: Dict[str, Any], value: Dict[str, Any], path: str) -> Dict[str, Any]:
    out = {}
    for name in value:
        if name not in fields:
            raise _fail(path, f"unknown field `{name}`")
    for name, field in fields.items():
        if name in value:
            out[name] = convert(hints.get(name, Any), value[name], _join(path, name))
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise _fail(path, f"missing field `{name}`")
    return out


def convert_arguments(
    hints: Dict[str, Any], required: List[str], var_keyword: bool, arguments: Any
) -> Dict[str, Any]:
    """A tool call's arguments (a JSON object) as keyword arguments for its function."""
    if not isinstance(arguments, dict):
        raise ArgumentError(f"invalid type: {_describe(arguments)}, expected an object")
    out: Dict[str, Any] = {}
    for name, value in arguments.items():
        if name in hints:
            out[name] = convert(hints[name], value, f"`{name}`")
        elif var_keyword:
            out[name] = value
        else:
            raise ArgumentError(f"unknown field `{name}`")
    for name in required:
        if name not in arguments:
            raise ArgumentError(f"missing field `{name}`")
    return out

