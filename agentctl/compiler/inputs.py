"""Checks of the run's inputs as declared: ``spec.inputSchema`` must be a usable JSON Schema,
and the defaults in ``spec.inputs`` should satisfy it (docs/running.md, "Inputs").

A default that does not fit is a warning, not an error: it is how a workflow says "this
input has no usable default, give it on the command line"; a run that does not give it is
refused before it is created (``input.schema_violation``, exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.compiler.drafts import Reporter
from agentctl.compiler.schemas import SchemaChecker

__all__ = ["check_input_schema"]


def check_input_schema(spec: Mapping[str, Any], reporter: Reporter, schemas: SchemaChecker) -> None:
    schema = spec.get("inputSchema")
    if schema is None or not schemas.check(schema, "spec.inputSchema", "spec.inputSchema"):
        return
    from agentctl.json_schemas import compile_schema, first_error

    defaults = spec.get("inputs") or {}
    mismatch = first_error(compile_schema(schema, "spec.inputSchema"), dict(defaults))
    if mismatch is not None:
        reporter.warning(
            "schema_violation",
            f"the defaults in spec.inputs do not satisfy spec.inputSchema at {mismatch.where}: "
            f"{mismatch.message}; a run must give that input",
            "spec.inputs",
            help="give the input with --input/--inputs, or change its default",
        )
