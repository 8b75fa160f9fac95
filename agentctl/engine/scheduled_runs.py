"""Runs a schedule starts: created and linked to their firing, executed by child processes.

The daemon (``agentctl.scheduling.daemon``) decides *which* slot fires; this module makes
the run. :meth:`RunLauncher.create` compiles the workflow resolved at the slot and commits
the run with the firing's link in one transaction. :meth:`RunLauncher.start` executes a run
in a child ``agentctl resume RUN`` process of its own session, so the run follows the
ordinary ownership rules (a daemon stopping or dying does not stop it) and its output goes
to ``logs/RUN.log`` beside the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agentctl.digest import canonical_json
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.ids import Clock, IdGenerator
from agentctl.store import locks, schedules_repo
from agentctl.store.engine import Store
from agentctl.store.location import state_directory
from agentctl.store.timestamps import to_iso

__all__ = ["Child", "RunLauncher"]


@dataclass
class Child:
    run_id: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path


@dataclass
class RunLauncher:
    """Creates scheduled runs and executes them in child processes."""

    store: Store
    clock: Clock
    children: dict[str, Child] = field(default_factory=dict)

    def create(self, request: Any) -> str:
        prepared = prepare_run(
            request.workflow_file,
            inputs_json=canonical_json(request.inputs),
            workspace=request.workspace,
            # A monitor passes its observation (previous, current, observedAt) as inputs.
            check_declared=False,
        )
        now = self.clock.now()

        def link(conn: Any, run_id: str) -> None:
            schedules_repo.link_run(conn, request.firing_id, run_id, now)

        return create_run(
            self.store,
            prepared,
            clock=self.clock,
            ids=IdGenerator(self.clock),
            reason=f"schedule {request.schedule} slot {to_iso(request.slot)}",
            link=link,
            link_locks=locks.schedule(request.schedule),
        )

    def log_dir(self) -> Path:
        return state_directory(self.store.path) / "logs"

    def start(self, run_id: str) -> None:
        if self.busy(run_id):
            return
        logs = self.log_dir()
        logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        log_path = logs / f"{run_id}.log"
        log = log_path.open("ab")
        command = [
            sys.executable,
            "-m",
            "agentctl",
            "--output",
            "jsonl",
            "resume",
            run_id,
        ]
        # The database in the environment, whole (store.path masks a URL's password, and
        # argv is visible to every user on the host).
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=self.store.child_environment(
                {k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"}
            ),
        )
        self.children[run_id] = Child(run_id, process, log, log_path)

    def observe_command(self, workflow_file: str, argv: list[str], project: Path) -> dict[str, Any]:
        """A monitor's command, under the workflow's shell rules (see
        :mod:`agentctl.engine.monitor_commands`)."""
        from agentctl.engine.monitor_commands import observe_command, workflow_document

        return observe_command(workflow_document(workflow_file), argv, project)

    def busy(self, run_id: str) -> bool:
        child = self.children.get(run_id)
        return child is not None and child.process.poll() is None

    def reap(self, *, wait: bool = False) -> list[dict[str, Any]]:
        """Finished children (all of them, waiting, when ``wait``): run id, exit code, log."""
        done: list[dict[str, Any]] = []
        for run_id, child in list(self.children.items()):
            code = child.process.wait() if wait else child.process.poll()
            if code is None:
                continue
            child.log.close()
            del self.children[run_id]
            done.append({"runId": run_id, "exitCode": code, "log": str(child.log_path)})
        return done

    @staticmethod
    def last_outcome(log_path: str) -> dict[str, Any] | None:
        """The final document a child wrote to its log (its RunOutcome or Error)."""
        try:
            lines = Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None
        for line in reversed(lines):
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if isinstance(document, dict):
                return document
        return None
