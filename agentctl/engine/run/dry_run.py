"""A throwaway copy of the workspace for ``roll --dry-run``.

A dry run keeps its state in memory; this keeps its *workspace* changes away from the
checkout too. The workspace directory is copied (symlinks kept as links) into a temporary
directory, the run's writes and processes happen there, and afterwards the copy is
compared with the original: the summary lists every file the run would have added,
modified or deleted (with ``--diff``, a unified diff of each text file). The copy is then
removed.

Only the workspace is copied, so a run whose ``workspaceRoot`` or ``writableRoots`` lie
outside it is refused: its writes could not be kept away from the real files.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from agentctl.engine.actions.workspace_writers import REGISTRY
from agentctl.errors import UsageError

__all__ = ["DIFF_LIMIT_BYTES", "ThrowawayWorkspace"]

DIFF_LIMIT_BYTES = 1 << 20
_LISTED_LIMIT = 1000


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _files(root: Path) -> dict[str, Path]:
    """Relative name -> path of every file and symlink under ``root`` (but agentctl's own
    record of which tasks write in the workspace, which no task changed)."""
    found: dict[str, Path] = {}
    registry = root / REGISTRY
    for directory, dirs, names in os.walk(root):
        here = Path(directory)
        if here == registry or here.is_relative_to(registry):
            continue
        for name in names + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            found[path.relative_to(root).as_posix()] = path
    return found


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    if a.stat().st_size != b.stat().st_size:
        return False
    return a.read_bytes() == b.read_bytes()


def _text(path: Path | None) -> list[str] | None:
    if path is None:
        return []
    if path.is_symlink() or path.stat().st_size > DIFF_LIMIT_BYTES:
        return None
    try:
        return path.read_text(encoding="utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


class ThrowawayWorkspace:
    """``with ThrowawayWorkspace(base, policy) as copy: …; copy.changes(diff=True)``."""

    def __init__(self, base: Path, policy: dict[str, Any]) -> None:
        self.base = base.resolve()
        root = (self.base / str(policy.get("workspaceRoot") or ".")).resolve()
        outside = [] if _inside(root, self.base) else [f"workspaceRoot `{root}`"]
        for writable in policy.get("writableRoots") or []:
            resolved = (root / str(writable)).resolve()
            if not _inside(resolved, self.base):
                outside.append(f"writable root `{resolved}`")
        if outside:
            raise UsageError(
                f"--dry-run copies the workspace {self.base} and runs in the copy, but "
                f"{', '.join(outside)} lies outside it, so the run's writes there could not "
                "be kept away from the real files",
                code="dry_run.workspace_outside",
                hint="keep workspaceRoot and writableRoots inside the workspace for a dry "
                "run, or run without --dry-run",
            )
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        self.copy = self.base

    def __enter__(self) -> ThrowawayWorkspace:
        self._temp = tempfile.TemporaryDirectory(prefix="agentctl-dry-run-")
        self.copy = Path(self._temp.name) / self.base.name
        shutil.copytree(self.base, self.copy, symlinks=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._temp is not None:
            self._temp.cleanup()

    def changes(self, *, diff: bool) -> list[dict[str, Any]]:
        """What the run changed in the copy, sorted by path: ``{path, change[, diff]}``."""
        before, after = _files(self.base), _files(self.copy)
        listed: list[dict[str, Any]] = []
        for name in sorted(set(before) | set(after)):
            old, new = before.get(name), after.get(name)
            if old is not None and new is not None and _same(old, new):
                continue
            change = "added" if old is None else "deleted" if new is None else "modified"
            item: dict[str, Any] = {"path": name, "change": change}
            if diff:
                a, b = _text(old), _text(new)
                item["diff"] = (
                    None
                    if a is None or b is None
                    else "".join(
                        difflib.unified_diff(a, b, fromfile=f"a/{name}", tofile=f"b/{name}")
                    )
                )
            listed.append(item)
            if len(listed) >= _LISTED_LIMIT:
                break
        return listed
