"""Which tasks write files in a workspace at the same time: what decides whether the files
a process left behind can be attributed to it.

A process may write anything under the writable roots, and agentctl cannot see which
process wrote a file; it compares a scan of the roots before and after the process. That
difference is the process's own work only if nothing else wrote in the workspace
meanwhile: a parallel task of the same run, or a task of another run (another
``agentctl roll``, a worker on another host) sharing the workspace. So every task that
writes files in a workspace (a process, ``builtin.write``, an agent's write tool) holds a
**writer window** for as long as it may write, and a process's scan is attributed only
when its window was the only one open from its first scan to its last.

The windows live in ``.agentctl/writers/state.json`` under the workspace root (shared by
every process and host that shares the workspace, and never scanned), changed under an
exclusive lock on ``.agentctl/writers/lock``:

- ``seq`` counts the windows ever opened; ``open`` lists those still open, each with its
  host, process id and an expiry (a task that was killed leaves its window behind: one of
  this host whose process is gone, or any whose expiry passed, is dropped);
- opening a window notes whether another one was open then, and the ``seq`` after its own;
  closing it notes whether ``seq`` moved since (another window opened meanwhile). Either
  means another writer overlapped: the window was **shared**.

A window that cannot be opened (a read-only workspace, a lock that cannot be taken) counts
as shared: attribution errs towards attributing nothing, never towards a wrong artifact.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["REGISTRY", "WriterWindow", "open_window", "writing"]

#: The registry's folder, relative to the workspace root (excluded from every scan).
REGISTRY = Path(".agentctl") / "writers"

#: How long past its own timeout a window of another host is trusted to be open.
_EXPIRY_MARGIN_SECONDS = 60.0


@dataclass
class WriterWindow:
    """One open window; :meth:`close` says whether another writer overlapped it."""

    root: Path | None
    window_id: str
    seq_after_open: int
    shared: bool
    closed: bool = False

    def close(self) -> bool:
        """Close the window (once); whether it was shared with another writer."""
        if self.closed:
            return self.shared
        self.closed = True
        if self.root is None:
            return True
        try:
            with _locked(self.root) as state:
                self.shared = self.shared or int(state.get("seq", 0)) != self.seq_after_open
                state.setdefault("open", {}).pop(self.window_id, None)
        except OSError:
            self.shared = True
        return self.shared


def open_window(workspace_root: Path, *, expected_seconds: float) -> WriterWindow:
    """Open a writer window for a task that may write for up to ``expected_seconds``."""
    window_id = uuid.uuid4().hex
    root = workspace_root / REGISTRY
    try:
        with _locked(root) as state:
            open_now: dict[str, Any] = state.setdefault("open", {})
            seq = int(state.get("seq", 0)) + 1
            state["seq"] = seq
            shared = bool(open_now)
            open_now[window_id] = {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "expires": time.time() + expected_seconds + _EXPIRY_MARGIN_SECONDS,
            }
    except OSError:
        return WriterWindow(None, window_id, 0, shared=True)
    return WriterWindow(root, window_id, seq, shared)


@contextmanager
def writing(workspace_root: Path, *, expected_seconds: float) -> Iterator[WriterWindow]:
    """A writer window for the ``with`` block (a task that writes files it names itself:
    it needs no attribution, but a process scanning meanwhile must know about it)."""
    window = open_window(workspace_root, expected_seconds=expected_seconds)
    try:
        yield window
    finally:
        window.close()


@contextmanager
def _locked(root: Path) -> Iterator[dict[str, Any]]:
    """The registry's state, read and written back under its exclusive lock."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(root / "lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            path = root / "state.json"
            try:
                state = json.loads(path.read_text() or "{}")
            except (OSError, ValueError):
                # Missing, or torn by a crash mid-write: start over, and count the window
                # as shared by forcing the sequence to move.
                state = {"seq": 1 if path.exists() else 0, "open": {}}
            if not isinstance(state, dict) or not isinstance(state.get("open"), dict):
                state = {"seq": 1, "open": {}}
            state["open"] = _live(state["open"])
            yield state
            temporary = root / f"state.{os.getpid()}.tmp"
            temporary.write_text(json.dumps(state))
            os.replace(temporary, path)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _live(windows: dict[str, Any]) -> dict[str, Any]:
    """The windows still open: not expired, and on this host not left by a dead process."""
    host = socket.gethostname()
    now = time.time()
    kept: dict[str, Any] = {}
    for window_id, entry in windows.items():
        with contextlib.suppress(TypeError, ValueError, KeyError):
            if float(entry["expires"]) < now:
                continue
            if entry["host"] == host and not _alive(int(entry["pid"])):
                continue
            kept[window_id] = entry
    return kept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
