"""Pydantic validation errors -> located, human-readable diagnostics.

One diagnostic per problem. The path is written in the format's own camelCase names
(``spec.tasks[0].loop.maxIterations``), union-branch noise in pydantic's locations is dropped,
and the message says what is wrong in the user's terms, e.g. "spec.tasks[0].loop.maxIterations
must be between 1 and 64, got 100". Model-level rules raised by validators keep their message.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Sequence
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from agentctl.diagnostics import Diagnostic
from agentctl.spec.document import Workflow
from agentctl.spec.models_common import ProcessSecretSpec
from agentctl.spec.source_map import SourceMap, diagnostic_at, path_of

__all__ = [
    "describe",
    "error_diagnostic",
    "error_segments",
    "field_at",
    "model_at",
    "unwrap_annotation",
]

_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "a boolean (true or false)",
    "bool_parsing": "a boolean (true or false)",
    "float_type": "a number",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "none_required": "null",
}

_REMOVED_FIELDS = {
    ("Tool", "compensation"): "`compensation` was removed from tools; declare `compensate` "
    "on the task that uses the mutating action instead",
}


def error_segments(loc: Sequence[str | int], raw: Any) -> list[str | int]:
    """The document segments of a pydantic ``loc``: union-branch tags are dropped.

    A segment is kept when it exists in the parsed document; the last segment is kept even
    when absent if its parent is a mapping (a missing field names itself). ``[key]`` markers
    of dict-key errors are dropped since the key is already the previous segment.
    """
    segments: list[str | int] = []
    current: Any = raw
    last = len(loc) - 1
    for index, segment in enumerate(loc):
        if isinstance(segment, int) and isinstance(current, list):
            if 0 <= segment < len(current):
                segments.append(segment)
                current = current[segment]
                continue
        elif isinstance(segment, str) and isinstance(current, dict):
            if segment in current:
                segments.append(segment)
                current = current[segment]
                continue
        # A missing field names itself; anything else absent is a union-branch tag.
        if index == last and isinstance(current, dict) and segment != "[key]":
            segments.append(segment)
    return segments


def unwrap_annotation(tp: Any) -> tuple[Any, list[Any]]:
    """Strip ``Annotated`` and ``X | None``; return the core type and collected metadata."""
    metadata: list[Any] = []
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            args = typing.get_args(tp)
            metadata.extend(args[1:])
            tp = args[0]
            continue
        if origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp, metadata


def _field_by_alias(model: type[BaseModel], key: str | int) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if key in (info.alias, name):
            return info
    return None


def _walk(segments: Sequence[str | int]) -> tuple[Any, type[BaseModel] | None, FieldInfo | None]:
    """Follow ``segments`` through the model types: (type there, owning model, its field)."""
    tp: Any = Workflow
    owner: type[BaseModel] | None = None
    info: FieldInfo | None = None
    for segment in segments:
        tp, _ = unwrap_annotation(tp)
        origin = typing.get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            owner, info = tp, _field_by_alias(tp, segment)
            if info is None:
                return None, None, None
            tp = info.annotation
        elif origin is list and isinstance(segment, int):
            owner, info = None, None
            tp = typing.get_args(tp)[0]
        elif origin is dict and isinstance(segment, str):
            owner, info = None, None
            tp = typing.get_args(tp)[1]
        else:
            return None, None, None
    return tp, owner, info


def field_at(segments: Sequence[str | int]) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The model owning the last segment and that segment's field, when both can be found."""
    _, owner, info = _walk(segments)
    return owner, info


def model_at(segments: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the node at ``segments``, if it is a single model."""
    tp, _, _ = _walk(segments)
    core, _ = unwrap_annotation(tp)
    return core if isinstance(core, type) and issubclass(core, BaseModel) else None


def _inclusive_range(segments: Sequence[str | int]) -> tuple[Any, Any]:
    """``(ge, le)`` declared on the field or list item at ``segments`` (``None`` if absent)."""
    tp, _, info = _walk(segments)
    _, metadata = unwrap_annotation(tp)
    items = [*(info.metadata if info is not None else []), *metadata]
    items += [m for item in items if isinstance(item, FieldInfo) for m in item.metadata]
    ge = next((i.ge for i in items if isinstance(i, annotated_types.Ge)), None)
    le = next((i.le for i in items if isinstance(i, annotated_types.Le)), None)
    return ge, le


def describe(value: Any) -> str:
    """A short, JSON-flavoured rendering of an input value for messages."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed_fields(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def error_diagnostic(error: ErrorDetails, raw: Any, source: SourceMap | None) -> Diagnostic:
    """One located diagnostic for one pydantic error."""
    segments = error_segments(error["loc"], raw)
    path = path_of(segments)
    parent = path_of(segments[:-1]) if segments else ""
    where = parent or "the document root"
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    help_text: str | None = None
    code = "schema_violation"
    name = segments[-1] if segments else ""
    if kind == "extra_forbidden":
        # Upstream's code set has no `unknown_field`: scripts branch on `schema_violation`,
        # and the precise reason (unknown key, snake_case spelling, the suggestion) is in
        # the message and the help.
        owner = model_at(segments[:-1])
        message = f"unknown field `{name}` at {where}"
        if owner is not None:
            allowed = _allowed_fields(owner)
            removed = _REMOVED_FIELDS.get((owner.__name__, str(name)))
            camel = to_camel(str(name))
            if removed is None and camel != name and camel in allowed:
                # Python spellings of a field are not synonyms in the format.
                message = f"unknown field `{name}` at {where}; the format spells it `{camel}`"
                help_text = f"rename `{name}` to `{camel}`"
            else:
                close = difflib.get_close_matches(str(name), allowed, n=1)
                hint = f"did you mean `{close[0]}`? " if close else ""
                help_text = removed or f"{hint}allowed fields: {', '.join(allowed)}"
    elif kind == "missing":
        message = f"missing required field `{name}` at {where}"
    elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        message = _bound_message(path, segments, kind, ctx, value)
    elif kind in _TYPE_NAMES:
        message = f"{path or 'the document'} must be {_TYPE_NAMES[kind]}, got {describe(value)}"
    elif kind == "literal_error":
        message = f"{path} must be {ctx.get('expected', 'one of the allowed values')}"
        message += f", got {describe(value)}"
    elif kind in ("too_short", "string_too_short"):
        minimum = ctx.get("min_length", 1)
        if kind == "string_too_short" and minimum == 1:
            message = f"{path} must not be empty"
        else:
            noun = "character" if kind == "string_too_short" else "item"
            message = f"{path} must have at least {minimum} {noun}{'s' if minimum != 1 else ''}"
    elif kind in ("too_long", "string_too_long"):
        message = f"{path} must have at most {ctx.get('max_length')} items"
    elif kind in ("value_error", "assertion_error"):
        text = str(ctx.get("error", error["msg"]))
        message = f"{path or 'the document'}: {text}"
    elif kind == "secret_unknown_field":
        inner = [str(part) for part in ctx.get("inner", [])]
        path = ".".join([path, *inner]) if path else ".".join(inner)
        field_name = str(ctx.get("field", ""))
        camel = to_camel(field_name)
        allowed = _allowed_fields(ProcessSecretSpec)
        message = f"unknown field `{field_name}` at {path.rsplit('.', 1)[0]}"
        if camel != field_name and camel in allowed:
            message += f"; the format spells it `{camel}`"
            help_text = f"rename `{field_name}` to `{camel}`"
        else:
            help_text = f"allowed fields: {', '.join(allowed)}"
    elif kind == "invalid_secret_reference":
        code = "invalid_secret_reference"
        message = f"{path}: {error['msg']}"
        help_text = "write a secret reference as `{env: NAME}` (or `{file: PATH}`, `{process: …}`)"
    else:
        message = f"{path or 'the document'}: {error['msg']}"
    return diagnostic_at(code, message, path, source, help=help_text)


_BOUND_PHRASES = {
    "greater_than_equal": "at least",
    "less_than_equal": "at most",
    "greater_than": "greater than",
    "less_than": "less than",
}


def _bound_message(
    path: str, segments: Sequence[str | int], kind: str, ctx: dict[str, Any], value: Any
) -> str:
    """ "must be between 1 and 64" when both ends are declared, else the one violated."""
    ge, le = _inclusive_range(segments)
    if ge is not None and le is not None:
        return f"{path} must be between {ge} and {le}, got {describe(value)}"
    limit = next(iter(ctx.values()), None)
    return f"{path} must be {_BOUND_PHRASES[kind]} {limit}, got {describe(value)}"
