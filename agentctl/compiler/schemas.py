"""JSON Schema slots must hold valid schemas (docs/workflow-language.md) and the default contracts
(docs/workflow-language.md).

Schemas are checked once per distinct object: expanded children share their source task's
``outputSchema`` object, so a 10,000-child ``foreach`` costs one check, not 10,000.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.compiler.drafts import Reporter, sub_path
from agentctl.json_schemas import SchemaProblem, schema_problem

__all__ = [
    "ACTION_CONTRACT",
    "AGGREGATE_CONTRACT",
    "LOOP_AGGREGATE_CONTRACT",
    "ROUTER_CONTRACT",
    "SchemaChecker",
    "plainly_valid",
]

ACTION_CONTRACT: Mapping[str, Any] = {"type": "object"}
AGGREGATE_CONTRACT: Mapping[str, Any] = {
    "type": "object",
    "properties": {"items": {"type": "array"}},
    "required": ["items"],
    "additionalProperties": False,
}
ROUTER_CONTRACT: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "selected": {},
        "matched": {"type": "boolean"},
        "destinations": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["selected", "matched", "destinations"],
    "additionalProperties": False,
}
LOOP_AGGREGATE_CONTRACT: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "iterations": {"type": "integer", "minimum": 0},
        "items": {"type": "array"},
    },
    "required": ["iterations", "items"],
    "additionalProperties": False,
}


_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
_TEXT = frozenset(("title", "description", "$comment", "format", "pattern"))
_SUBSCHEMA = frozenset(("additionalProperties", "items", "not", "contains", "propertyNames"))
_SUBSCHEMA_LISTS = frozenset(("allOf", "anyOf", "oneOf"))
_COUNTS = frozenset(
    ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
)
_NUMBERS = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
_SCALARS = (str, int, float, bool)


def plainly_valid(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` is built only from common keywords whose values have the shape
    the meta-schema of the draft jsonschema picks for a schema without ``$schema`` (the
    latest) requires, so it is valid without asking jsonschema. False means "not known":
    the caller checks it with jsonschema.

    Never True for an invalid schema (a property test compares it with jsonschema). A
    ``$schema`` (which picks the draft) or any other keyword is left to jsonschema.
    ``pattern`` is left to jsonschema too unless it compiles as a Python regex."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 32:
        return False
    for key, value in schema.items():
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or len(set(map(str, names))) != len(names):
                return False
            if not all(isinstance(n, str) and n in _TYPES for n in names):
                return False
        elif key == "properties":
            if not isinstance(value, dict):
                return False
            if not all(plainly_valid(sub, depth + 1) for sub in value.values()):
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                return False
            if len(set(value)) != len(value):
                return False
        elif key in _SUBSCHEMA:
            if not plainly_valid(value, depth + 1):
                return False
        elif key in _SUBSCHEMA_LISTS:
            if not isinstance(value, list) or not value:
                return False
            if not all(plainly_valid(sub, depth + 1) for sub in value):
                return False
        elif key in _COUNTS:
            if type(value) is not int or value < 0:
                return False
        elif key in _NUMBERS:
            if type(value) not in (int, float) or value != value:  # NaN is not JSON
                return False
        elif key == "enum":
            if not isinstance(value, list) or not value:
                return False
            if not all(v is None or type(v) in _SCALARS for v in value):
                return False
            if len({(type(v), v) for v in value}) != len(value):
                return False
        elif key in _TEXT:
            if not isinstance(value, str):
                return False
            if key == "pattern" and not _compiles(value):
                return False
        else:
            return False
    return True


def _compiles(pattern: str) -> bool:
    import re

    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


class SchemaChecker:
    """Reports ``schema_violation`` for invalid JSON Schemas, remembering what it checked.

    Every schema is judged by agentctl.json_schemas (docs/json-schemas.md), the one home of
    what a usable schema is: valid for its draft, and referring only inside itself.
    """

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self._seen: dict[int, tuple[Any, SchemaProblem | None]] = {}

    def problem(self, schema: Any) -> SchemaProblem | None:
        """Why ``schema`` is not a usable JSON Schema (``None`` when it is)."""
        cached = self._seen.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        why: SchemaProblem | None = None
        if not plainly_valid(schema):
            # Most schemas in workflows are plainly valid (see above) and have no `$ref`:
            # they skip loading jsonschema, a large share of `agentctl check`'s start-up.
            why = schema_problem(schema)
        # Keep the object alive alongside its id so a recycled id never hits a stale entry.
        self._seen[id(schema)] = (schema, why)
        return why

    def check(self, schema: Any, path: str, what: str) -> bool:
        """True when ``schema`` is valid; otherwise reports at ``path`` and returns False."""
        why = self.problem(schema)
        if why is None:
            return True
        self.reporter.error(
            "schema_violation",
            f"{what} is not a valid JSON Schema: {why.message}",
            sub_path(path, *why.segments),
            help="fix the schema so it validates against its JSON Schema meta-schema and "
            "refers only inside itself (`#/$defs/name`; docs/json-schemas.md)",
        )
        return False
