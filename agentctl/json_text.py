"""The one parser of JSON a user types or names: ``--var``, ``--input``, ``--inputs``,
``--inputs-file``, reconcile's result and schema files, and question answers.

Python's ``json`` accepts what no JSON document may hold and what agentctl cannot store:
``NaN`` and ``Infinity``, numbers that overflow to infinity (``1e999``), strings holding a
lone UTF-16 surrogate (``"\\ud800"``), and nesting deep enough to exhaust the interpreter's
stack. :func:`parse_json_text` refuses each of them with a ``ValueError`` whose message says
which, so the caller can name the value and exit 2 instead of failing later.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "JsonTextError", "parse_json_text"]

MAX_JSON_DEPTH = 128
"""Deepest nesting accepted, as for workflow documents (docs/workflow-language.md)."""


class JsonTextError(ValueError):
    """Text that is not JSON agentctl accepts; ``msg`` says why (like ``JSONDecodeError``)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


def _constant(name: str) -> Any:
    raise JsonTextError(f"`{name}` is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonTextError(f"the number {text} is out of range")
    return value


def parse_json_text(text: str) -> Any:
    """The JSON value of ``text``; ``JsonTextError`` (a ``ValueError``) when it is not
    valid, finite, at most :data:`MAX_JSON_DEPTH` deep and free of lone surrogates."""
    if _nesting(text) > MAX_JSON_DEPTH:
        raise JsonTextError(f"the value is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except JsonTextError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonTextError(exc.msg) from exc
    except ValueError as exc:  # an integer with more digits than Python converts
        raise JsonTextError(str(exc)) from exc
    except RecursionError as exc:  # pragma: no cover - the nesting check comes first
        raise JsonTextError("the value is nested too deeply") from exc
    _check_strings(value)
    return value


def _nesting(text: str) -> int:
    """How deep the brackets of ``text`` nest outside strings, without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _well_formed(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                _well_formed(key)
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)


def _well_formed(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonTextError(
            f"a string holds a lone UTF-16 surrogate ({text[exc.start]!r}), which is not text"
        ) from None
