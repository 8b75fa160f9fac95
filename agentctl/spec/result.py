"""The outcome of loading one workflow file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.errors import UsageError
from agentctl.spec.document import Workflow
from agentctl.spec.source_map import SourceMap

__all__ = ["MAX_DOCUMENT_BYTES", "LoadResult", "unreadable_file"]

MAX_DOCUMENT_BYTES = 1_048_576
"""Largest workflow file accepted, checked before parsing (docs/workflow-language.md)."""


@dataclass
class LoadResult:
    """What a loader found: the model (when valid), every diagnostic, and where things are."""

    path: str
    document: Workflow | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: SourceMap | None = None
    raw: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """A document exists and no diagnostic is an error (warnings are fine)."""
        return self.document is not None and not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


def unreadable_file(error: UsageError, file: str) -> Diagnostic:
    """The diagnostic of a workflow file the one input reader refused (agentctl.input_files)."""
    return Diagnostic(code="schema_violation", message=error.message, file=file, help=error.hint)
