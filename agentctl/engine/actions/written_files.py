"""Which files a process left under the writable roots: the candidates for artifacts.

A process may write anything; agentctl ingests only what is safely the task's own work.
Before and after the process runs, the writable roots are scanned (bounded, symlinked
directories not followed). What changed between the scans is the process's own work only
when no other task wrote in the workspace meanwhile (:mod:`workspace_writers` decides);
otherwise nothing is attributed and the names are reported as ``unattributedFiles``
(:func:`appeared`). When the scans are the process's own:

- a regular file that is new or changed (modification time or size) and at most 16 MiB
  becomes an artifact candidate; larger ones stay in the workspace untracked;
- a symlink the process created or changed fails the task: an artifact is bytes the task
  wrote, and a link could carry a file from outside the workspace into the store;
- a new or changed file with other hard links fails the task unless every one of its
  links was found under the writable roots: a hard link to a file elsewhere (``ln
  /etc/passwd out/x``) is the same escape without a symlink.
"""

from __future__ import annotations

import os
import stat as stat_module
from dataclasses import dataclass
from pathlib import Path

from agentctl.engine.actions.workspace_writers import REGISTRY
from agentctl.policy.paths import WorkspacePolicy
from agentctl.signals import TaskFailure
from agentctl.tools.files import is_atomic_temp

__all__ = [
    "ARTIFACT_SCAN_LIMIT",
    "AUTO_INGEST_MAX_BYTES",
    "WRITTEN_FILES",
    "Snapshot",
    "appeared",
    "changed_files",
    "recorded_files",
    "signatures",
    "snapshot",
]

#: The key under which a process effect's journaled result lists the files it wrote (it is
#: removed from the task's output): a resume after a crash ingests exactly those.
WRITTEN_FILES = "writtenFiles"

ARTIFACT_SCAN_LIMIT = 10_000
AUTO_INGEST_MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Entry:
    mtime_ns: int
    size: int
    inode: tuple[int, int]
    links: int
    symlink: bool

    @property
    def signature(self) -> tuple[int, int, tuple[int, int], bool]:
        return (self.mtime_ns, self.size, self.inode, self.symlink)


@dataclass(frozen=True, slots=True)
class Snapshot:
    entries: dict[Path, _Entry]
    complete: bool


def snapshot(workspace: WorkspacePolicy) -> Snapshot:
    """Every regular file and symlink under the writable roots (at most 10,000)."""
    seen: dict[Path, _Entry] = {}
    registry = workspace.workspace_root / REGISTRY
    for root in workspace.writable_roots:
        if not root.is_dir():
            continue
        for path in root.rglob("*"):
            if len(seen) >= ARTIFACT_SCAN_LIMIT:
                return Snapshot(seen, complete=False)
            if path.is_relative_to(registry):
                continue  # agentctl's own bookkeeping of who writes here
            if is_atomic_temp(path.name):
                # Another task's builtin.write in flight (a concurrent run in this
                # workspace): renamed away in a moment, never this process's work.
                continue
            try:
                info = path.lstat()
            except OSError:
                continue
            link = stat_module.S_ISLNK(info.st_mode)
            if link or stat_module.S_ISREG(info.st_mode):
                seen[path] = _Entry(
                    info.st_mtime_ns,
                    info.st_size,
                    (info.st_dev, info.st_ino),
                    info.st_nlink,
                    link,
                )
    return Snapshot(seen, complete=True)


def _name(workspace: WorkspacePolicy, path: Path) -> str:
    try:
        return str(path.relative_to(workspace.workspace_root))
    except ValueError:
        return str(path)


def appeared(before: Snapshot, after: Snapshot, workspace: WorkspacePolicy) -> list[str]:
    """The names of the files and links new or changed between two scans."""
    return [
        _name(workspace, path)
        for path, entry in sorted(after.entries.items())
        if (previous := before.entries.get(path)) is None or previous.signature != entry.signature
    ]


def changed_files(
    workspace: WorkspacePolicy, before: Snapshot, after: Snapshot | None = None
) -> list[tuple[str, Path]]:
    """``(artifact name, path)`` of each file to ingest (``after`` scanned now when not
    given); ``TaskFailure`` for a symlink or an outside hard link the process left behind."""
    if after is None:
        after = snapshot(workspace)
    links_seen: dict[tuple[int, int], int] = {}
    for entry in after.entries.values():
        if not entry.symlink:
            links_seen[entry.inode] = links_seen.get(entry.inode, 0) + 1
    changed = []
    for path, entry in sorted(after.entries.items()):
        previous = before.entries.get(path)
        if previous is not None and previous.signature == entry.signature:
            continue
        name = _name(workspace, path)
        if entry.symlink:
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            raise TaskFailure(
                f"the process left a symlink `{name}` -> `{target}` under a writable root; "
                "symlinks are never ingested as artifacts",
                code="artifact.symlink_refused",
                details={"path": name, "target": target},
            )
        if entry.links > 1 and (not after.complete or links_seen[entry.inode] < entry.links):
            raise TaskFailure(
                f"the process left `{name}` hard-linked to a file outside the writable roots "
                f"({entry.links} links, {links_seen[entry.inode]} of them under the roots); "
                "it is not ingested as an artifact",
                code="artifact.hard_link_refused",
                details={"path": name, "links": entry.links},
            )
        if entry.size <= AUTO_INGEST_MAX_BYTES:
            changed.append((name, path))
    return changed


def signatures(files: list[tuple[str, Path]]) -> list[list[object]]:
    """``[name, mtime_ns, size]`` of each file, as journaled with a process effect."""
    out: list[list[object]] = []
    for name, path in files:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # removed since the scan (by another process): nothing to ingest
        out.append([name, info.st_mtime_ns, info.st_size])
    return out


def recorded_files(workspace: WorkspacePolicy, recorded: object) -> list[tuple[str, Path]]:
    """The files a journaled process effect wrote, still as it left them. A file that is
    gone or was changed since cannot become the task's artifact: fail loudly."""
    files: list[tuple[str, Path]] = []
    for name, mtime_ns, size in recorded or []:  # type: ignore[attr-defined]
        path = workspace.workspace_root / str(name)
        try:
            info: os.stat_result | None = path.lstat()
        except OSError:
            info = None
        if info is None or (info.st_mtime_ns, info.st_size) != (mtime_ns, size):
            state = "is gone" if info is None else "was changed after the process wrote it"
            raise TaskFailure(
                f"{name}, written by this task's process before an interruption, {state}; "
                "its bytes cannot be recorded as the task's artifact",
                code="artifact.missing",
                details={"path": str(name)},
            )
        files.append((str(name), path))
    return files
