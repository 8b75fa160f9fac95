"""Diagnostics: located findings about a workflow document or a command's input.

A diagnostic is what a user reads to fix a file: a stable ``code`` (upstream's codes for the
workflow format), a severity, a message, and where it is — file, 1-based line and column, and
a dotted path such as ``spec.tasks[2].loop.maxIterations`` — plus an optional ``help`` line
that says what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Diagnostic", "Severity"]

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    message: str
    severity: Severity = "error"
    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = None
    help: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        """The CLI's shape: ``{code, severity, message, file, line?, column?, path?, help?}``."""
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
        }
        for key in ("line", "column", "path", "help"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    def location(self) -> str:
        """``FILE:LINE:COL`` as far as it is known (human rendering)."""
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)
