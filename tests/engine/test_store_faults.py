"""A full disk while journaling never turns a dispatched effect into a failure."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

# The step prints 2 MiB, so its outcome commit is far larger than anything before it.
BIG_OUTPUT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: big-output}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    work:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo ran >> counter; head -c 2097152 /dev/zero | tr '\\\\0' x"]
      stdoutLimitBytes: 4194304
      combinedOutputLimitBytes: 8388608
  tasks:
    - {id: step, uses: "action:work"}
"""


def _limit_file_size() -> None:
    # 1.5 MiB: room for the schema and the run's first commits, not for the outcome.
    resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 19, 3 << 19))


def test_a_full_disk_at_the_outcome_leaves_the_run_resumable(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(BIG_OUTPUT)
    db = tmp_path / "r.db"
    assert cli("db", "migrate", "--db", db).exit_code == 0
    limited = subprocess.run(
        [sys.executable, "-m", "agentctl", "roll", str(path), "--db", str(db)],
        cwd=workspace,
        env={**os.environ, "AGENTCTL_STORE_RETRY_SECONDS": "0.5"},
        preexec_fn=_limit_file_size,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert limited.returncode == 5, limited.stdout + limited.stderr
    assert "could not be recorded" in limited.stderr
    assert "full" in limited.stderr
    with sqlite3.connect(db) as conn:
        run_id, status = conn.execute("SELECT id, status FROM runs").fetchone()
        (effect,) = conn.execute("SELECT status FROM effects").fetchone()
    conn.close()
    assert (status, effect) == ("running", "started")  # nothing concluded
    blocked = cli("--output", "json", "resume", run_id, "--db", db)
    assert blocked.exit_code == 3, blocked.stdout + blocked.stderr
    (uncertain,) = blocked.json()["data"]["uncertainEffects"]
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"exitCode": 0, "stdout": "x", "stderr": ""}))
    concluded = cli(
        "reconcile", uncertain["effectId"], "--status", "applied", "--reason", "it ran",
        "--result-file", result, "--db", db,
    )  # fmt: skip
    assert concluded.exit_code == 0, concluded.stderr
    finished = cli("resume", run_id, "--db", db)
    assert finished.exit_code == 0, finished.stdout + finished.stderr
    assert (workspace / "counter").read_text() == "ran\n"
