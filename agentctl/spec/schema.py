"""JSON Schema of the workflow document, generated from the models.

Editors and CI can validate files against it. It describes shapes and per-field bounds;
rules that span fields (exactly one of ``instructions``/``instructionsFile``, router
destinations, kind-specific action fields …) are enforced by the loader and the compiler,
not by this schema.
"""

from __future__ import annotations

from typing import Any

from agentctl.spec.document import Workflow

__all__ = ["SCHEMA_ID", "workflow_json_schema"]

SCHEMA_ID = "https://agentctl.dev/schemas/workflow-v1.json"
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def workflow_json_schema() -> dict[str, Any]:
    """The ``agentctl.dev/v1`` workflow document schema (draft 2020-12, camelCase keys)."""
    generated = Workflow.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": _DIALECT,
        "$id": SCHEMA_ID,
        "title": "agentctl workflow (agentctl.dev/v1)",
        **{k: v for k, v in generated.items() if k != "title"},
    }
