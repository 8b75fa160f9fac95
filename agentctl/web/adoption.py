"""Adoption: once a parked run has every answer it waited for, the dashboard resumes it.

The resume is ``agentctl resume RUN`` in a child process: the very operation a person would
type, with its own ownership lease, fencing and signal handling, and no executor inside the
web server's event loop. A retry or fork created from the dashboard is executed the same
way (:meth:`Adopter.start`). Only a run that is ``paused`` (or still ``running`` under an
owner that died), has no pending approval, question or effect in doubt left, and whose
previous owner is gone is adopted (the rule is agentctl/store/adoption.py's, shared with
the daemon and the workers); a live owner is never taken over (the store's ownership
rules refuse it anyway).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from agentctl.runtime_dashboard import Dashboard

__all__ = ["Adopter"]


class Adopter:
    """Starts and reaps the resume processes of adopted runs."""

    def __init__(self, dashboard: Dashboard, *, enabled: bool, log_dir: Path | None = None) -> None:
        self.dashboard = dashboard
        self.enabled = enabled
        self.log_dir = log_dir
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def ready(self, run_id: str) -> bool:
        """True when nothing the run waits for is left unanswered and no live process owns
        it: a parked run, or one whose executing process died (killed mid-run, it is still
        ``running`` under its dead owner) once every effect it left in doubt is concluded."""
        return self.dashboard.adoptable(run_id)

    def maybe_adopt(self, run_id: str) -> bool:
        """Resume the run in a child process when it is ready; True if one was started."""
        if not self.enabled or not self.ready(run_id):
            return False
        return self.start(run_id)

    def start(self, run_id: str) -> bool:
        """Execute ``run_id`` in a child ``agentctl resume`` (a retry or fork the dashboard
        just created, or an adopted run); False when a child of ours already runs it."""
        with self._lock:
            self._reap()
            if run_id in self._children:
                return False
            # The database goes in the environment, whole: store.path is masked (a
            # child given it could not log in), and argv is visible to every user.
            command = [sys.executable, "-m", "agentctl", "--output", "json", "resume", run_id]
            env = self.dashboard.child_environment(os.environ)
            if self.log_dir is None:
                child = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            else:
                self.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                with (self.log_dir / f"{run_id}.resume.log").open("ab") as log:
                    child = subprocess.Popen(
                        command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
                    )
            self._children[run_id] = child
        return True

    def _reap(self) -> None:
        for run_id, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[run_id]

    def running(self) -> list[str]:
        with self._lock:
            self._reap()
            return sorted(self._children)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the resume processes (the dashboard is stopping; they finish their
        runs or park them again on their own, so they are never killed)."""
        with self._lock:
            children = list(self._children.values())
        for child in children:
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                continue
