"""Output contracts met without the JSON Schema validator.

Most contracts are small structural schemas — the plain ``{type: object}`` of an action,
the ``{items: array}`` record of a foreach aggregate, a few typed required properties.
Checking those by hand costs microseconds, where the validator costs an import of about
40 ms in a fresh process and a pass per output after that. :func:`plainly_valid` only ever
*accepts*: it answers ``True`` when the output certainly meets the contract under JSON
Schema 2020-12, and ``False`` when it is not sure — a keyword it does not know, or a
violation — so the validator decides every other case and words every failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["any_object", "plainly_valid"]

#: Keywords the fast path understands; any other keyword hands the decision over.
#: ``title``, ``description`` and ``$comment`` are annotations and assert nothing.
_KNOWN = frozenset(
    {"type", "properties", "required", "additionalProperties", "items"}
    | {"title", "description", "$comment"}
)


def _has_type(value: Any, name: Any) -> bool | None:
    """Whether ``value`` is a JSON Schema ``name``; ``None`` for a name it does not know."""
    kind = type(value)
    if name == "object":
        return kind is dict
    if name == "array":
        return kind is list
    if name == "string":
        return kind is str
    if name == "boolean":
        return kind is bool
    if name == "null":
        return value is None
    if name == "number":
        return kind is int or kind is float
    if name == "integer":
        return kind is int or (kind is float and value.is_integer())
    return None


def _type_ok(value: Any, declared: Any) -> bool:
    names = declared if type(declared) is list else [declared]
    return any(_has_type(value, name) for name in names)


def plainly_valid(schema: Any, value: Any) -> bool:
    """``True`` when ``value`` certainly satisfies ``schema``; ``False`` when unsure."""
    if schema is True:
        return True
    if not (type(schema) is dict or isinstance(schema, Mapping)) or not _KNOWN.issuperset(schema):
        return False
    if "type" in schema and not _type_ok(value, schema["type"]):
        return False
    if type(value) is dict:
        return _object_ok(schema, value)
    if type(value) is list and "items" in schema:
        items = schema["items"]
        return all(plainly_valid(items, item) for item in value)
    return True


def _object_ok(schema: Mapping[str, Any], value: Mapping[str, Any]) -> bool:
    properties = schema.get("properties", {})
    required = schema.get("required", ())
    extra = schema.get("additionalProperties", True)
    if not properties and not required and extra is True:
        return True  # any object (the plain ``{type: object}`` of most actions)
    if not isinstance(properties, Mapping) or not isinstance(required, list | tuple):
        return False
    if not all(type(key) is str and key in value for key in required):
        return False
    for key, item in value.items():
        sub = properties.get(key, extra)
        if sub is not True and not plainly_valid(sub, item):
            return False
    return True


#: Contracts seen, by identity, and whether each accepts any object (a plan's tasks share
#: their contract objects: a fan-out's children one, most actions the same plain one).
_ANY_OBJECT: dict[int, tuple[Any, bool]] = {}


def any_object(schema: Any) -> bool:
    """Whether ``schema`` accepts every object: ``{type: object}`` with annotations at most,
    the contract of most actions. Remembered per contract object, so the check of an
    output against it is a type test."""
    found = _ANY_OBJECT.get(id(schema))
    if found is not None and found[0] is schema:
        return found[1]
    plain = (
        (type(schema) is dict or isinstance(schema, Mapping))
        and all(key in ("type", "title", "description", "$comment") for key in schema)
        and schema.get("type") in ("object", ["object"])
    )
    if len(_ANY_OBJECT) >= 4096:
        _ANY_OBJECT.clear()
    _ANY_OBJECT[id(schema)] = (schema, bool(plain))
    return bool(plain)
