"""Source positions of document nodes, keyed by the dotted paths diagnostics use.

A path names a node the way a user reads the document: ``spec.tasks[2].loop.maxIterations``.
Map keys that are not plain words (``[A-Za-z0-9_-]+``) are written as JSON strings in
brackets (``spec.actions["my.action"]``) so the path stays unambiguous.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agentctl.diagnostics import Diagnostic, Severity

__all__ = ["SourceMap", "diagnostic_at", "join_path", "parent_path", "path_of"]

_WORD_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_LAST_SEGMENT_RE = re.compile(r'(?:\.[A-Za-z0-9_-]+|\[\d+\]|\["(?:[^"\\]|\\.)*"\])$')


def join_path(parent: str, segment: str | int) -> str:
    """The path of child ``segment`` (a map key or a list index) under ``parent``."""
    if isinstance(segment, int):
        return f"{parent}[{segment}]"
    if _WORD_RE.fullmatch(segment):
        return f"{parent}.{segment}" if parent else segment
    return f"{parent}[{json.dumps(segment, ensure_ascii=False)}]"


def path_of(segments: Iterable[str | int]) -> str:
    """Join a whole sequence of segments into one path."""
    path = ""
    for segment in segments:
        path = join_path(path, segment)
    return path


def parent_path(path: str) -> str | None:
    """The path one level up, or ``None`` for the document root (``""``)."""
    if not path:
        return None
    match = _LAST_SEGMENT_RE.search(path)
    return "" if match is None else path[: match.start()]


@dataclass(frozen=True)
class SourceMap:
    """Dotted path -> 1-based ``(line, column)`` for every node of one document.

    Map entries point at their key (that is the line a user edits); list items at the item.
    """

    file: str
    positions: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: str) -> tuple[int, int] | None:
        """Position of ``path``, else of its nearest located ancestor, else ``None``."""
        current: str | None = path
        while current is not None:
            found = self.positions.get(current)
            if found is not None:
                return found
            current = parent_path(current)
        return None

    def where(self, path: str) -> tuple[str, tuple[int, int] | None]:
        """The file a path is written in and its position there (one file here; a
        workflow with packs overrides this for the items that came from a manifest)."""
        return self.file, self.locate(path)

    def __contains__(self, path: object) -> bool:
        return path in self.positions


def diagnostic_at(
    code: str,
    message: str,
    path: str | None,
    source: SourceMap | None,
    help: str | None = None,
    severity: Severity = "error",
) -> Diagnostic:
    """A diagnostic whose file, line and column come from ``source`` for ``path``."""
    line: int | None = None
    column: int | None = None
    file = source.file if source is not None else None
    if source is not None and path is not None:
        file, located = source.where(path)
        if located is not None:
            line, column = located
    return Diagnostic(
        code=code,
        message=message,
        severity=severity,
        file=file,
        line=line,
        column=column,
        path=path,
        help=help,
    )
