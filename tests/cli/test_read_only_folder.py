"""A read-only database in a read-only folder can be read (issue 38 item 6).

Reading commands open it read-only and, since its folder has no write bit, as immutable:
nothing is created beside it (no -wal, no -shm), which as a non-root user is what makes
reading possible at all. Writing commands keep refusing it with `store.read_only`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

OK = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ok}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - id: a
      uses: action:set
      with: {x: 1}
"""


@pytest.fixture
def frozen(cli: Any, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    folder = tmp_path / "frozen"
    folder.mkdir()
    db = folder / "r.db"
    workflow = tmp_path / "ok.yaml"
    workflow.write_text(OK)
    rolled = cli("--output", "json", "roll", workflow, "--db", db)
    assert rolled.exit_code == 0, rolled.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]  # checkpointed on close
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield db, rolled.json()["data"]["runId"]
    finally:
        folder.chmod(0o755)
        db.chmod(0o600)


def test_reading_commands_work_and_create_nothing_beside_it(
    cli: Any, frozen: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = frozen
    listed = cli("--output", "json", "runs", "list", "--db", db)
    assert listed.exit_code == 0, listed.stderr
    assert [r["runId"] for r in listed.json()["data"]["runs"]] == [run_id]
    inspected = cli("--output", "json", "inspect", run_id, "--db", db)
    assert inspected.exit_code == 0, inspected.stderr
    assert sorted(os.listdir(db.parent)) == ["r.db"]
    refused = cli("--output", "json", "roll", tmp_path / "ok.yaml", "--db", db)
    assert refused.exit_code == 5
    assert refused.error_json()["error"]["code"] == "store.read_only"
    assert sorted(os.listdir(db.parent)) == ["r.db"]
