"""Parsed mapping -> :class:`Workflow`, or located diagnostics.

This is the one place where a document meets the models, shared by the YAML/JSON loader and
the Python definition API, so every front end reports problems the same way.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from agentctl.diagnostics import Diagnostic
from agentctl.spec.document import Workflow
from agentctl.spec.model_errors import error_diagnostic, error_segments
from agentctl.spec.source_map import SourceMap, path_of

__all__ = ["sort_diagnostics", "validate_document"]

_MAX_PASSES = 4


def validate_document(
    data: Any,
    source: SourceMap | None = None,
    scalar_text: Mapping[str, str] | None = None,
) -> tuple[Workflow | None, list[Diagnostic]]:
    """Validate ``data`` against the document model.

    ``scalar_text`` maps paths of plain YAML scalars that were read as booleans or numbers to
    their original text. Where the model expects a string there, the text is used instead, so
    ``processAllowlist: [true]`` means the executable ``true`` and ``version: 1.10`` keeps
    its trailing zero, while free-form JSON slots keep the typed value (docs/workflow-language.md).
    """
    texts = scalar_text or {}
    current = data
    errors: list[Any] = []
    for _ in range(_MAX_PASSES):
        try:
            return Workflow.model_validate(current, by_alias=True, by_name=False), []
        except PydanticValidationError as exc:
            errors = list(exc.errors(include_url=False))
        fixes: list[tuple[list[str | int], str]] = []
        for error in errors:
            if error["type"] != "string_type" or not isinstance(
                error.get("input"), bool | int | float
            ):
                continue
            segments = error_segments(error["loc"], current)
            text = texts.get(path_of(segments))
            if text is not None:
                fixes.append((segments, text))
        if not fixes:
            break
        if current is data:
            current = copy.deepcopy(data)
        for segments, text in fixes:
            _assign(current, segments, text)
    return None, sort_diagnostics([error_diagnostic(e, current, source) for e in errors])


def _assign(root: Any, segments: Sequence[str | int], value: str) -> None:
    target = root
    for segment in segments[:-1]:
        target = target[segment]
    target[segments[-1]] = value


def sort_diagnostics(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Document order: located ones by position, unlocated ones after, otherwise stable."""
    big = 1 << 62
    return sorted(diagnostics, key=lambda d: (d.line or big, d.column or 0))
