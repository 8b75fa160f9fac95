"""JSON Schema slots must hold valid schemas (docs/workflow-language.md) and the default contracts
(docs/workflow-language.md).

Schemas are checked once per distinct object: expanded children share their source task's
``outputSchema`` object, so a 10,000-child ``foreach`` costs one check, not 10,000.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.compiler.drafts import Reporter

__all__ = [
    "ACTION_CONTRACT",
    "AGGREGATE_CONTRACT",
    "LOOP_AGGREGATE_CONTRACT",
    "ROUTER_CONTRACT",
    "SchemaChecker",
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


class SchemaChecker:
    """Reports ``schema_violation`` for invalid JSON Schemas, remembering what it checked."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self._seen: dict[int, tuple[Any, str | None]] = {}

    def problem(self, schema: Any) -> str | None:
        """Why ``schema`` is not a valid JSON Schema (``None`` when it is)."""
        cached = self._seen.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        why: str | None = None
        if isinstance(schema, bool):
            why = None
        elif not isinstance(schema, dict):
            why = "a JSON Schema must be an object or a boolean"
        else:
            # Imported on first use: most workflows declare no schema, and jsonschema is a
            # large share of `agentctl check`'s start-up.
            import jsonschema
            from jsonschema.exceptions import SchemaError

            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except SchemaError as exc:
                why = exc.message
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
            f"{what} is not a valid JSON Schema: {why}",
            path,
            help="fix the schema so it validates against its JSON Schema meta-schema",
        )
        return False
