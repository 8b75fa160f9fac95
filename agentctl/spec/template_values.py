"""JSON value semantics shared by templates, conditions and routers (docs/templates.md).

Python's own ``==``, ``bool()`` and ``str()`` differ from the reference in ways a workflow
can observe: ``True == 1`` and ``1 == 1.0`` are true in Python but not in the format
(docs/templates.md), ``str(1e20)`` is ``1e+20`` where the format writes ``1e20``, and ``json.loads``
accepts ``NaN`` where the format does not. Everything here follows the reference instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "WHITESPACE",
    "copy_json",
    "is_json_number",
    "is_truthy",
    "json_equal",
    "json_text",
    "parse_literal",
]

# Unicode White_Space: what the reference trims (Rust's `str::trim`). Python's `str.strip()`
# also strips U+001C..U+001F, which the reference keeps.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# Literals nested deeper than this are not JSON for the reference (its parser's recursion
# limit), so they fall back to a bare string like any other non-JSON right-hand side.
_MAX_LITERAL_DEPTH = 127

# Integers outside this range are read as floats by the reference's JSON parser.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


class _NotJson(ValueError):
    """Raised inside the literal parser for text the reference would not accept as JSON."""


def _reject_constant(name: str) -> Any:
    raise _NotJson(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotJson(text)
    return value


def _reference_int(text: str) -> int | float:
    value = int(text)
    # `-0` and out-of-range integers are floats for the reference; equality depends on it.
    if text.lstrip("-").lstrip("0") == "" and text.startswith("-"):
        return -0.0
    if value < _INT_MIN or value > _INT_MAX:
        return float(value)
    return value


def _too_deep(value: Any) -> bool:
    # Iterative on purpose: the literal may be nested close to Python's recursion limit.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            if depth + 1 > _MAX_LITERAL_DEPTH:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def parse_literal(text: str) -> Any:
    """The value of a condition's right-hand side.

    JSON first (``true``, ``3``, ``"x"``, ``null``, ``[1]`` …); anything else is a bare
    string with every leading and trailing ``'``/``"`` removed (``'approved'`` → ``approved``).
    ``text`` is expected to be trimmed already.
    """
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_reference_int,
        )
    except (ValueError, RecursionError):
        return text.strip("'\"")
    if _too_deep(value):
        return text.strip("'\"")
    return value


def is_json_number(value: Any) -> bool:
    """True for JSON numbers; booleans are not numbers here, unlike in Python."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(left: Any, right: Any) -> bool:
    """JSON equality as the reference defines it: type first, then value.

    ``1`` ≠ ``true``, ``1`` ≠ ``"1"``, ``1`` ≠ ``1.0`` (integers and floats are different
    kinds of number), objects compare by content regardless of key order.
    """
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int) and isinstance(right, int):
        return left == right
    if isinstance(left, float) and isinstance(right, float):
        return left == right
    if is_json_number(left) or is_json_number(right):
        return False
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return False


def is_truthy(value: Any) -> bool:
    """Truthiness of a condition without an operator.

    False for ``null``, ``false``, ``0`` (and ``0.0``), ``""``, ``[]``, ``{}``; true otherwise.
    """
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if is_json_number(value):
        return float(value) != 0.0
    if isinstance(value, str | list | Mapping):
        return len(value) > 0
    return True


def _float_text(value: float) -> str:
    """Shortest round-trip text laid out like the reference (``1.0``, ``1e20``, ``1e-7``)."""
    if not math.isfinite(value):
        # The reference cannot hold a non-finite number; it becomes null.
        return "null"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    # value = int(digits) * 10**last, then trailing zeros are folded into the exponent.
    last = (int(exponent) if exponent else 0) - len(fraction)
    digits = (whole + fraction).lstrip("0")
    stripped = digits.rstrip("0")
    last += len(digits) - len(stripped)
    digits = stripped
    point = len(digits) + last
    if 0 <= last and point <= 16:
        text = digits + "0" * last + ".0"
    elif 0 < point <= 16:
        text = digits[:point] + "." + digits[point:]
    elif -5 < point <= 0:
        text = "0." + "0" * -point + digits
    elif len(digits) == 1:
        text = f"{digits}e{point - 1}"
    else:
        text = f"{digits[0]}.{digits[1:]}e{point - 1}"
    return sign + text


def json_text(value: Any) -> str:
    """Text of a scalar inside interpolation: ``null``, ``true``/``false``, numbers, strings.

    Callers reject objects and arrays before asking.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    return str(value)


#: Types a copy keeps as they are (immutable JSON scalars, exactly these types).
_LEAVES = frozenset({str, int, float, bool, type(None)})


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value, so rendered results never alias the context."""
    kind = type(value)
    # Exact JSON types first: the ABC checks below are several times slower, and a join
    # that reads a fan-out's items copies thousands of values; a leaf inside an object or
    # array is kept without a call for it.
    if kind is dict:
        return {
            key: item if type(item) in _LEAVES else copy_json(item) for key, item in value.items()
        }
    if kind in _LEAVES:
        return value
    if kind is list:
        return [item if type(item) in _LEAVES else copy_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value
