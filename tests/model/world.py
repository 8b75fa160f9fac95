"""One schedule's world: a workspace, one database, the ledger the process steps append to,
and what the harness knows about every agentctl process it started.

The ledger is the outside world's truth. Every process step of the workflows in
``workflows/`` appends ``<marker> <label> <agentctl pid>`` and prints the marker, so:

- the pid says which agentctl process — hence which run — executed the line,
- the effect's recorded result (stdout) or an ``applied`` reconciliation's result names the
  line it accounts for,
- a started-but-unconfirmed effect is reconciled truthfully: applied (with the marker of
  its unexplained line) when its line is there, not applied when it is not.

Each world writes the workflows through tests/generators.py: keys in a seed-chosen order at
every level, in a seed-chosen YAML style (``ext.yaml`` also gets its interpreter, extension
path and approval mode), so the same schedules cover documents whose first attempt sees
another key order than their resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.generators import STYLES, shuffled, yaml_text
from tests.model.launcher import Launcher, Proc, Result

__all__ = ["LABELS", "Background", "LedgerLine", "World"]

WORKFLOWS = Path(__file__).with_name("workflows")

#: (workflow name, task id) -> the ledger label its process step writes.
LABELS = {
    ("model-ledger", "a"): "ledger.a",
    ("model-ledger", "check"): "ledger.check",
    ("model-ledger", "b"): "ledger.b",
    ("model-ledger", "compensate--a"): "undo.a",
    ("model-gated", "mark"): "gated.mark",
    ("model-slow", "hold"): "slow.hold",
    ("model-slow", "mark"): "slow.mark",
    ("model-ext", "apply"): "ext.apply",
    ("model-fn", "step"): "fn.mark",
}
EXTENSION = Path(__file__).with_name("ledger_extension.py")


@dataclass(frozen=True)
class LedgerLine:
    marker: str
    label: str
    pid: int


@dataclass
class Background:
    proc: Proc
    run_id: str | None = None
    marker: str | None = None


@dataclass
class World:
    root: Path
    launcher: Launcher
    #: A PostgreSQL database for this schedule (its artifacts live where SQLite's would);
    #: None: a SQLite file in the workspace.
    url: str | None = None
    ws: Path = field(init=False)
    db: Path = field(init=False)
    #: agentctl pid -> the run it executed (roll/resume/retry/compensate).
    pid_run: dict[int, str] = field(default_factory=dict)
    #: pids of ``agentctl worker`` processes (they execute many runs each).
    worker_pids: set[int] = field(default_factory=set)
    #: run -> the run its lineage started from (retry/replay/compensate keep the root).
    lineage: dict[str, str] = field(default_factory=dict)
    workflow_of: dict[str, str] = field(default_factory=dict)
    mode_of: dict[str, str] = field(default_factory=dict)
    source_of: dict[str, str | None] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    background: Background | None = None
    tags: int = 0
    #: Chooses how this world writes its workflows (key order, YAML style, approvals).
    seed: int = 0

    def __post_init__(self) -> None:
        self.ws = self.root / "ws"
        self.ws.mkdir(parents=True)
        # Its own generator: the schedule's moves stay what they were for each seed.
        rng = random.Random(f"workflows-{self.seed}")
        for wf in sorted(WORKFLOWS.glob("*.yaml")):
            text = (
                wf.read_text()
                .replace("@PYTHON_NAME@", Path(sys.executable).name)
                .replace("@PYTHON@", sys.executable)
                .replace("@EXTENSION@", str(EXTENSION))
                .replace("@APPROVAL@", rng.choice(["never", "mutations"]))
            )
            document = shuffled(yaml.safe_load(text), rng)
            (self.ws / wf.name).write_text(yaml_text(document, rng.choice(STYLES)))
        for module in sorted(WORKFLOWS.glob("*.py")):  # a function step's code
            (self.ws / module.name).write_text(module.read_text())
        os.mkfifo(self.ws / "ready.fifo")
        os.mkfifo(self.ws / "gate.fifo")
        (self.ws / "ledger.txt").touch()
        self.db = self.ws / "state" / "runtime.db"

    # -- commands -------------------------------------------------------------------------

    @property
    def database(self) -> str:
        return self.url or str(self.db)

    def start(self, args: list[str], *, env: dict[str, str] | None = None, skew: float = 0) -> Proc:
        if self.url is not None:
            env = {"AGENTCTL_ARTIFACT_ROOT": str(self.db.parent / "artifacts"), **(env or {})}
        return self.launcher.start([*args, "--db", self.database], self.ws, env, skew)

    def run(self, args: list[str], *, env: dict[str, str] | None = None, skew: float = 0) -> Result:
        return self.start(args, env=env, skew=skew).wait()

    def next_tag(self) -> str:
        self.tags += 1
        return f"t{self.tags}"

    # -- the outside world ----------------------------------------------------------------

    def ledger(self) -> list[LedgerLine]:
        lines = []
        for raw in (self.ws / "ledger.txt").read_text().splitlines():
            marker, label, pid = raw.split()
            lines.append(LedgerLine(marker, label, int(pid)))
        return lines

    def wait_ready(self, proc: Proc) -> str | None:
        """Block until the slow workflow's held step reports in (its marker), or the process
        ends first (None). Event-driven: poll() on the FIFO and on a pidfd, no sleeping."""
        fifo = os.open(self.ws / "ready.fifo", os.O_RDONLY | os.O_NONBLOCK)
        pidfd = os.pidfd_open(proc.pid)
        data = b""
        try:
            poller = select.poll()
            poller.register(fifo, select.POLLIN)
            poller.register(pidfd, select.POLLIN)
            while True:
                events = dict(poller.poll(120_000))
                if not events:
                    raise TimeoutError("the slow workflow never reported in (120 s)")
                if fifo in events:
                    chunk = os.read(fifo, 4096)
                    data += chunk
                    if data.endswith(b"\n"):
                        return data.decode().strip()
                    if not chunk and not events.get(pidfd):
                        # The writer has not connected yet: a FIFO with no writer reads empty.
                        poller.unregister(fifo)
                        os.close(fifo)
                        fifo = os.open(self.ws / "ready.fifo", os.O_RDONLY | os.O_NONBLOCK)
                        poller.register(fifo, select.POLLIN)
                        continue
                if pidfd in events:
                    return None
        finally:
            os.close(fifo)
            os.close(pidfd)

    def open_gate(self) -> bool:
        """Let a held step (of a live or orphaned process) finish; False when none waits."""
        try:
            fd = os.open(self.ws / "gate.fifo", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return False
        os.close(fd)
        return True

    # -- the database, read-only ----------------------------------------------------------

    def connect(self) -> Any:
        """A read-only connection with sqlite3's ``execute(sql, params)`` (``?`` marks)."""
        if self.url is not None:
            return _Postgres(self.url)
        return sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)

    def db_exists(self) -> bool:
        # A PostgreSQL database exists (migrated, empty) before the first command.
        return self.url is not None or self.db.exists()

    def run_rows(self) -> dict[str, dict[str, Any]]:
        if not self.db_exists():
            return {}
        columns = ("id", "workflow_name", "mode", "status", "source_run_id", "owner_id")
        conn = self.connect()
        try:
            return {
                row[0]: dict(zip(columns, row, strict=True))
                for row in conn.execute(f"SELECT {', '.join(columns)} FROM runs").fetchall()
            }
        finally:
            conn.close()

    def fingerprint(self, run_id: str) -> str:
        """A digest of everything about a run a step could change (to inspect only those)."""
        conn = self.connect()
        try:
            parts = [
                conn.execute(
                    "SELECT status, updated_at, owner_id, cancel_requested FROM runs WHERE id = ?",
                    (run_id,),
                ).fetchall(),
                conn.execute(
                    "SELECT task_id, status, attempt, output_digest, artifact_manifest_json "
                    "FROM tasks WHERE run_id = ? ORDER BY task_id",
                    (run_id,),
                ).fetchall(),
                conn.execute(
                    "SELECT id, status, confirmed, result_json FROM effects WHERE run_id = ? "
                    "ORDER BY id",
                    (run_id,),
                ).fetchall(),
                conn.execute(
                    "SELECT r.id FROM reconciliations r JOIN effects e ON e.id = r.effect_id "
                    "WHERE e.run_id = ? ORDER BY r.id",
                    (run_id,),
                ).fetchall(),
                conn.execute(
                    "SELECT id, status FROM approvals WHERE run_id = ? ORDER BY id", (run_id,)
                ).fetchall(),
                conn.execute(
                    "SELECT COUNT(*), MAX(seq) FROM audit_events WHERE run_id = ?", (run_id,)
                ).fetchall(),
                conn.execute(
                    "SELECT blob_digest FROM artifact_refs WHERE run_id = ? ORDER BY id",
                    (run_id,),
                ).fetchall(),
            ]
        finally:
            conn.close()
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()

    def manifests(self, run_id: str) -> list[tuple[str, str]]:
        """(task, blob digest) for every artifact the run's tasks list in their manifest."""
        conn = self.connect()
        try:
            rows = conn.execute(
                "SELECT task_id, artifact_manifest_json FROM tasks WHERE run_id = ? AND "
                "artifact_manifest_json IS NOT NULL",
                (run_id,),
            ).fetchall()
        finally:
            conn.close()
        found = []
        for task_id, text in rows:
            for entry in json.loads(text) or []:
                found.append((task_id, str(entry.get("digest"))))
        return found

    def integrity(self) -> str:
        if self.url is not None:
            return "ok"  # page-level integrity is the server's own business
        conn = self.connect()
        try:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            conn.close()

    def blob_ok(self, digest: str) -> str | None:
        """None when the blob is present with the right bytes, else what is wrong."""
        hex_ = digest.removeprefix("sha256:")
        path = self.db.parent / "artifacts" / "blobs" / hex_[:2] / hex_[2:]
        try:
            data = path.read_bytes()
        except OSError:
            return "missing"
        return None if hashlib.sha256(data).hexdigest() == hex_ else "corrupt"

    # -- bookkeeping ----------------------------------------------------------------------

    def learn_runs(self, pid: int | None, result: Result | None, before: set[str]) -> list[str]:
        """Record the runs that appeared since ``before`` (and which pid made them)."""
        rows = self.run_rows()
        new = [run_id for run_id in rows if run_id not in before]
        for run_id in new:
            row = rows[run_id]
            source = row["source_run_id"]
            self.workflow_of[run_id] = row["workflow_name"]
            self.mode_of[run_id] = row["mode"]
            self.source_of[run_id] = source
            self.lineage[run_id] = self.lineage.get(source, source) if source else run_id
        if pid is not None:
            owned = None
            doc = result.json() if result is not None else None
            data = doc.get("data") or doc.get("error") if isinstance(doc, dict) else None
            if isinstance(data, dict) and isinstance(data.get("runId"), str):
                owned = data["runId"]
            elif len(new) == 1:
                owned = new[0]
            if owned is not None:
                self.pid_run[pid] = owned
        return new


class _Postgres:
    """The few calls the model test makes on a sqlite3 connection, on PostgreSQL."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)

    def execute(self, statement: str, parameters: tuple[Any, ...] = ()) -> Any:
        from tests.pg.backends import postgres_text

        return self._conn.execute(postgres_text(statement), parameters)

    def close(self) -> None:
        self._conn.close()
