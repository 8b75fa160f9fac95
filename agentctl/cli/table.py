"""Aligned text tables for human output, with optional colour per cell.

Columns are aligned on the visible text (escape codes take no width), so a table reads the
same with colours on or off; colour follows ``--color`` and ``NO_COLOR`` for stdout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["STATE_COLORS", "Cell", "duration_text", "render", "time_text"]

# SGR codes by run, task and effect state.
STATE_COLORS = {
    "succeeded": "32",
    "applied": "32",
    "failed": "31",
    "uncertain": "1;31",
    "paused": "33",
    "waiting_for_approval": "33",
    "waiting_for_effect": "33",
    "running": "36",
    "started": "36",
    "pending": "2",
    "requested": "2",
    "skipped": "2",
    "cancelled": "35",
}


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    sgr: str | None = None


def render(headers: Sequence[str], rows: Sequence[Sequence[Cell | str]], *, color: bool) -> str:
    """The table as lines: a header, then one line per row, columns two spaces apart."""
    cells = [[c if isinstance(c, Cell) else Cell(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell.text))

    def line(row: Sequence[Cell], bold: bool = False) -> str:
        parts = []
        for i, cell in enumerate(row):
            padded = cell.text if i == len(row) - 1 else cell.text.ljust(widths[i])
            sgr = "1" if bold else cell.sgr
            if color and sgr:
                padded = f"\x1b[{sgr}m{cell.text}\x1b[0m" + padded[len(cell.text) :]
            parts.append(padded)
        return "  ".join(parts).rstrip()

    return "\n".join([line([Cell(h) for h in headers], bold=True), *(line(r) for r in cells)])


def time_text(iso: str) -> str:
    """A stored UTC time (ISO, naive or aware) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    value = datetime.fromisoformat(iso)
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"
