"""The reconcile form's text, checked in the page's own words before the engine sees it.

``agentctl reconcile`` reads results and schemas from files and its messages name its flags;
a person at the dashboard typed into fields instead. This module turns the fields into the
engine's :class:`~agentctl.engine.operations.ReconcileRequest` (values given directly, so
the engine applies the same size, JSON and schema rules) and says what is wrong with them in
terms of the form: which field, and what it must hold. A refused form is drawn again with
what was typed (:class:`Draft`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentctl.errors import UsageError
from agentctl.json_schemas import compile_schema, first_error
from agentctl.runtime_dashboard import MAX_EVIDENCE_BYTES, ReconcileRequest, result_shape

__all__ = ["Draft", "shape_of", "to_request"]

STATUSES = ("not_applied", "applied", "compensated")


@dataclass
class Draft:
    """What a person typed into one reconcile form."""

    status: str = "not_applied"
    reason: str = ""
    evidence: str = ""
    result: str = ""
    result_schema: str = ""
    problems: list[str] = field(default_factory=list)


def shape_of(effect: dict[str, Any]) -> dict[str, Any] | None:
    """``{schema, example}`` texts for the form: what an *applied* result must look like."""
    shape = result_shape(str(effect.get("operation") or ""))
    if shape is None:
        return None
    schema, example = shape
    return {
        "schema": json.dumps(schema, indent=2),
        "example": json.dumps(example, indent=2),
    }


def _json(text: str, field_name: str, problems: list[str]) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(
            f"The {field_name} field is not valid JSON ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}). Paste a JSON value, like the example shown."
        )
        return None


def to_request(
    effect: dict[str, Any], draft: Draft, actor: str
) -> tuple[ReconcileRequest | None, list[str]]:
    """The engine request for a filled form, or None and what to fix (in page words)."""
    problems: list[str] = []
    if draft.status not in STATUSES:
        problems.append("Choose a conclusion: not applied, applied or compensated.")
    if not draft.reason:
        problems.append("Say why in the reason field (it is kept in the audit log).")
    if len(draft.evidence.encode()) > MAX_EVIDENCE_BYTES:
        problems.append("The evidence is longer than 1 MiB; keep what shows the outcome.")
    result = _json(draft.result, "result", problems) if draft.result else None
    schema = _json(draft.result_schema, "result schema", problems) if draft.result_schema else None
    if schema is not None and not isinstance(schema, dict):
        problems.append("The result schema must be a JSON object (a JSON Schema).")
        schema = None
    known = result_shape(str(effect.get("operation") or ""))
    if draft.status == "applied" and not draft.result and effect.get("result") is None:
        problems.append(
            f"“Applied” needs the result {effect.get('operation')} produced, and none was "
            "recorded before its outcome was lost: paste it in the result field"
            + (" (its shape and an example are shown above the form)." if known else ".")
        )
    if draft.status == "applied" and result is not None and not problems:
        checks = [("the schema you gave", schema)] if schema is not None else []
        if known is not None:
            checks.append((f"the shape {effect.get('operation')} returns", known[0]))
        for what, against in checks:
            # The one way schemas are compiled (docs/json-schemas.md): references stay in
            # the document, nothing is fetched.
            try:
                mismatch = first_error(compile_schema(against, what), result, what)
            except UsageError as exc:
                problems.append(f"The result schema cannot be used: {exc.message}.")
                continue
            if mismatch is not None:
                where = "" if mismatch.where == "(root)" else f" at {mismatch.where}"
                problems.append(f"The result does not match {what}{where}: {mismatch.message}.")
    if problems:
        return None, problems
    request = ReconcileRequest(
        effect_id=str(effect["effectId"]),
        status=draft.status,
        reason=draft.reason,
        actor=actor,
        evidence=draft.evidence or None,
        result=result if draft.status == "applied" else None,
        result_schema=schema if draft.status == "applied" else None,
    )
    return request, []
