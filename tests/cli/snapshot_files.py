"""Snapshot files for the human views: tests/cli/snapshots/NAME.txt, compared byte for byte.

A missing or different snapshot fails the test with a diff. Snapshots are written only when
asked: ``AGENTCTL_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/cli/test_view_snapshots.py``
rewrites them; review the change with ``git diff tests/cli/snapshots`` before committing.
Colour escapes are stored as they are printed, so ``cat`` shows the colours.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

__all__ = ["SNAPSHOTS", "UPDATE_ENV", "assert_snapshot"]

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE_ENV = "AGENTCTL_UPDATE_SNAPSHOTS"


def _visible(text: str) -> list[str]:
    return [line.replace("\x1b", "\\x1b") for line in text.splitlines()]


def assert_snapshot(name: str, text: str) -> None:
    """``text`` must equal snapshot ``name`` (written instead when UPDATE_ENV is 1)."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get(UPDATE_ENV) == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        raise AssertionError(
            f"no snapshot {path.name}; create it with {UPDATE_ENV}=1 and review it:\n{text}"
        )
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = difflib.unified_diff(
            _visible(expected), _visible(text), f"{path.name} (stored)", "printed", lineterm=""
        )
        raise AssertionError(
            f"{path.name} differs from what the command printed; if the change is intended, "
            f"rerun with {UPDATE_ENV}=1 and review `git diff`:\n" + "\n".join(diff)
        )
