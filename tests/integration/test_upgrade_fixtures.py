"""Runs recorded by an earlier release keep their identities after an upgrade.

tests/fixtures/upgrade holds database files written by the release named in each
``release.txt`` (by ``make_fixtures.py``): a run parked on an approval, a run killed after
an at-most-once dispatch, and a failed run. That release hashed an effect's input in the
order its keys were built, so every effect id it wrote differs from the one this release
derives; the journal must still recognise each effect by its position and request, and
never dispatch it a second time.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade"


def _moved(name: str, tmp_path: Path) -> tuple[Path, Path, str]:
    """The fixture copied to ``tmp_path``, its recorded paths pointed at the copy."""
    workspace = tmp_path / name
    shutil.copytree(FIXTURES / name, workspace)
    db = workspace / "state.db"
    db.chmod(0o600)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE runs SET workspace = ?, workflow_file = ?",
            (str(workspace), str(workspace / "wf.yaml")),
        )
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    return workspace, db, str(run_id)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _effects(cli: Any, run_id: str, db: Path) -> list[dict[str, Any]]:
    data = cli("--output", "json", "effects", "list", run_id, "--db", db).json()["data"]
    return list(data["effects"] if isinstance(data, dict) else data)


def test_a_parked_approval_is_approved_once_and_dispatched_once(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, db, run_id = _moved("parked", tmp_path)
    monkeypatch.chdir(workspace)
    (old,) = _effects(cli, run_id, db)
    pending = cli("--output", "json", "approvals", "list", "--db", db).json()["data"]
    (approval,) = pending["approvals"] if isinstance(pending, dict) else pending
    approval_id = approval.get("id") or approval["approvalId"]
    assert approval_id == "approval-" + old["effectId"][:16]
    assert cli("approvals", "approve", approval_id, "--reason", "ok", "--db", db).exit_code == 0
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
    assert _lines(workspace / "ledger.txt") == 1
    effects = _effects(cli, run_id, db)
    # The effect the old release journaled, under its old id: no second one.
    assert [(e["effectId"], e["status"]) for e in effects] == [(old["effectId"], "succeeded")]


def test_an_interrupted_dispatch_stays_uncertain_and_is_never_redone(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, db, run_id = _moved("uncertain", tmp_path)
    monkeypatch.chdir(workspace)
    assert _lines(workspace / "ledger.txt") == 1
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 3, resumed.stdout + resumed.stderr
    (effect,) = _effects(cli, run_id, db)
    assert effect["status"] == "uncertain"
    assert _lines(workspace / "ledger.txt") == 1
    result = tmp_path / "result.json"
    result.write_text('{"exitCode": 0, "stdout": "done\\n", "stderr": ""}')
    reconciled = cli(
        "reconcile",
        effect["effectId"],
        "--status",
        "applied",
        "--reason",
        "the ledger has the line",
        "--result-file",
        result,
        "--approved",
        "--db",
        db,
    )
    assert reconciled.exit_code == 0, reconciled.stdout + reconciled.stderr
    again = cli("--output", "json", "resume", run_id, "--db", db)
    assert again.exit_code == 0, again.stdout + again.stderr
    assert again.json()["data"]["output"]["after"]["output"]["out"] == "done\n"
    assert _lines(workspace / "ledger.txt") == 1
    assert [e["effectId"] for e in _effects(cli, run_id, db)] == [effect["effectId"]]


def test_a_failed_run_is_replayed_retried_and_repaired(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, db, run_id = _moved("failed", tmp_path)
    monkeypatch.chdir(workspace)
    wf = workspace / "wf.yaml"
    assert _lines(workspace / "counter.txt") == 1
    replayed = cli("--output", "json", "replay", run_id, "--db", db)
    assert replayed.exit_code in (0, 4), replayed.stdout + replayed.stderr
    for command in (["retry", wf, run_id, "--failed"], ["repair", wf, run_id]):
        planned = cli("--output", "json", *command, "--plan", "--db", db)
        assert planned.exit_code == 0, planned.stdout + planned.stderr
        actions = {t["taskId"]: t["action"] for t in planned.json()["data"]["tasks"]}
        # The upgrade changed no definition: the expensive step is reused.
        assert actions["build"] == "reuse", (command[0], actions)
    (workspace / "ready").write_text("")
    retried = cli("--output", "json", "retry", wf, run_id, "--failed", "--db", db)
    assert retried.exit_code == 0, retried.stdout + retried.stderr
    assert retried.json()["data"]["output"]["publish"]["output"]["artifact"] == "built\n"
    repaired = cli("--output", "json", "repair", wf, run_id, "--db", db)
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
    assert _lines(workspace / "counter.txt") == 1
