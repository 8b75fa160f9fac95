"""The fast path of the schema check: `plainly_valid` may say "valid" only when jsonschema
agrees, so skipping jsonschema for such schemas changes no diagnostic."""

from __future__ import annotations

import os
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentctl.compiler.schemas import plainly_valid

TYPE_NAMES = st.sampled_from(["string", "object", "integer", "null", "strng", ""])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["a", "b"]))
ANYTHING = st.one_of(SCALARS, st.floats(allow_nan=True), st.lists(SCALARS, max_size=2))


def _value(key: str, inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Right and wrong values for ``key``: only right ones may pass the fast path."""
    right_or_wrong: dict[str, st.SearchStrategy[Any]] = {
        "type": st.one_of(TYPE_NAMES, st.lists(TYPE_NAMES, max_size=3)),
        "properties": st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
        "required": st.lists(st.one_of(st.sampled_from(["a", "b"]), st.integers(0, 1)), max_size=3),
        "additionalProperties": inner,
        "items": st.one_of(inner, st.lists(inner, max_size=2)),
        "not": inner,
        "allOf": st.lists(inner, max_size=2),
        "oneOf": st.lists(inner, max_size=2),
        "minLength": st.one_of(st.integers(-2, 3), st.booleans(), st.floats(0, 2)),
        "maxItems": st.one_of(st.integers(-2, 3), st.sampled_from(["1"])),
        "minimum": st.one_of(st.integers(-2, 2), st.floats(allow_nan=True), st.booleans()),
        "exclusiveMaximum": st.one_of(st.integers(-2, 2), st.booleans(), st.none()),
        "enum": st.one_of(st.lists(ANYTHING, max_size=3), SCALARS),
        "pattern": st.sampled_from(["^a+$", "[a-", "(x", "\\d{2}"]),
        "title": st.one_of(st.text(max_size=3), st.integers(0, 1)),
        "format": st.one_of(st.sampled_from(["date", "nonsense"]), st.integers(0, 1)),
        "$schema": st.sampled_from(["http://json-schema.org/draft-04/schema#", "x"]),
        "const": ANYTHING,
        "unknownKeyword": ANYTHING,
    }
    return right_or_wrong[key]


KEYS = [
    "type", "properties", "required", "additionalProperties", "items", "not", "allOf",
    "oneOf", "minLength", "maxItems", "minimum", "exclusiveMaximum", "enum", "pattern",
    "title", "format", "$schema", "const", "unknownKeyword",
]  # fmt: skip


def _schemas() -> st.SearchStrategy[Any]:
    def objects(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.lists(st.sampled_from(KEYS), unique=True, max_size=3).flatmap(
            lambda keys: st.fixed_dictionaries({key: _value(key, inner) for key in keys})
        )

    return st.recursive(st.one_of(st.booleans(), st.just({}), ANYTHING), objects, max_leaves=8)


def _jsonschema_accepts(schema: Any) -> bool:
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return True


# 400 examples in `make test` (1,500 took over a minute of the suite on a loaded machine);
# AGENTCTL_SOAK=1 draws 5,000.
@settings(max_examples=5000 if os.environ.get("AGENTCTL_SOAK") == "1" else 400)
@given(_schemas())
@pytest.mark.slow
def test_plainly_valid_schemas_are_valid(schema: Any) -> None:
    if isinstance(schema, dict | bool) and plainly_valid(schema):
        assert _jsonschema_accepts(schema), schema


def test_the_common_shapes_take_the_fast_path() -> None:
    review = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["approve", "request_changes"]},
            "note": {"type": ["string", "null"], "enum": ["x", None]},
            "count": {"type": ["integer", "null"], "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
        "required": ["verdict"],
        "additionalProperties": False,
    }
    assert plainly_valid(review)
    for wrong in (
        {"type": "strng"},
        {"required": ["a", "a"]},
        {"minLength": -1},
        {"minimum": True},
        {"pattern": "[a-"},
        {"items": [{"type": "string"}]},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "string"},
    ):
        assert not plainly_valid(wrong), wrong
