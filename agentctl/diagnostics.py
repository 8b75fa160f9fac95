"""Diagnostics: located findings about a workflow document or a command's input.

A diagnostic is what a user reads to fix a file: a stable ``code`` (upstream's codes for the
workflow format), a severity, a message, and where it is — file, 1-based line and column, and
a dotted path such as ``spec.tasks[2].loop.maxIterations`` — plus an optional ``help`` line
that says what to do next.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass

from agentctl.errors import Severity
from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

__all__ = ["Diagnostic", "Severity"]


@dataclass(frozen=True, slots=True, config=CAMEL)
class Diagnostic(CamelRecord):
    """A finding; built as ``Diagnostic(code, message, severity=…, file=…, …)``.

    Its JSON form (what ``--output json`` prints) is ``{code, severity, message, file}``
    and ``line``, ``column``, ``path`` and ``help`` when known; ``extra`` is for the
    program only.
    """

    code: str
    # Keyword-only so it can sit between code and message, where the JSON form has it.
    severity: Severity = Field(default="error", kw_only=True)
    message: str
    file: str | None = None
    line: int | None = omitted_when(None)
    column: int | None = omitted_when(None)
    path: str | None = omitted_when(None)
    help: str | None = omitted_when(None)
    extra: Annotated[dict[str, Any], Field(exclude=True)] = field(
        default_factory=dict, compare=False
    )

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def location(self) -> str:
        """``FILE:LINE:COL`` as far as it is known (human rendering)."""
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)
