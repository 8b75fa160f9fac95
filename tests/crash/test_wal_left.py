"""What a killed ``agentctl roll`` leaves in the write-ahead log is bounded.

The next process to open the database reads every frame written since the last
checkpoint before its first statement (SQLite's recovery of the log's index), so this is
part of every resume after a crash. With SQLite's default automatic checkpoint (1,000
pages) a chain killed at step 70 left 777 frames; the store's connections checkpoint at
``WAL_AUTOCHECKPOINT_PAGES``, so at most that many plus the transactions of one step.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from agentctl.store.health import wal_frames
from agentctl.store.sqlite_connections import WAL_AUTOCHECKPOINT_PAGES
from tests.crash.cli import cli

pytestmark = pytest.mark.crash

#: Frames one step of the chain may add after the checkpoint's threshold is crossed (its
#: transitions write about ten pages; one step's commits are far below this).
ONE_STEP = 50


def _chain(n: int) -> str:
    lines = [
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: wal-chain}\n"
        "spec:\n  policy: {approval: never}\n  actions:\n    step: {kind: builtin.assign}\n"
        "  tasks:\n"
    ]
    for i in range(n):
        needs = f", needs: [s{i - 1}]" if i else ""
        lines.append(f"    - {{id: s{i}, uses: 'action:step', with: {{i: {i}}}{needs}}}\n")
    return "".join(lines)


def _roll(ws: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli([*args, "--db", "runs.db"], ws, {"AGENTCTL_FAULT": fault} if fault else None)


@pytest.mark.parametrize("killed_after", [45, 70])
def test_a_killed_run_leaves_at_most_the_checkpoint_size_in_the_log(
    tmp_path: Path, killed_after: int
) -> None:
    (tmp_path / "wf.yaml").write_text(_chain(80))
    killed = _roll(tmp_path, "roll", "wf.yaml", fault=f"task.committed:{killed_after}")
    assert killed.returncode == -9, killed.stderr
    left = wal_frames(tmp_path / "runs.db")
    assert 0 < left <= WAL_AUTOCHECKPOINT_PAGES + ONE_STEP
    # The resume reads them back and finishes the chain.
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    resumed = _roll(tmp_path, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert len(json.loads(resumed.stdout)["data"]["output"]) == 80
