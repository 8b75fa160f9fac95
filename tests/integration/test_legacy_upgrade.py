"""``runs analyze`` / ``runs upgrade``: the reuse metadata of runs an older release recorded
is proven from the stored records, then persisted exactly (docs/durable-execution.md,
"Runs recorded by older releases").

The recorded fixtures (tests/fixtures/upgrade, see make_fixtures.py) were written by a
release whose task fingerprints did not cover the resolved definition; the generated run
is this release's, with its records then put in older or damaged shapes by hand.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade"


def _copied(name: str, tmp_path: Path) -> tuple[Path, Path, str]:
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


def _rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT task_id, definition_fingerprint, input_digest, output_contract_fingerprint, "
            "output_digest, state_delta_digest FROM tasks ORDER BY run_id, ordinal"
        ).fetchall()
    conn.close()
    return rows


def _events(cli: Any, run_id: str, db: Path) -> list[str]:
    audit = cli("--output", "json", "audit", run_id, "--verify", "--db", db)
    assert audit.exit_code == 0, audit.stdout + audit.stderr
    return [event["kind"] for event in audit.json()["data"]["events"]]


def _tasks(analysis: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {task["taskId"]: task for task in analysis["tasks"]}


def test_a_recorded_failed_run_is_analyzed_then_upgraded_once(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, db, run_id = _copied("failed", tmp_path)
    monkeypatch.chdir(workspace)
    planned = cli("--output", "json", "plan", workspace / "wf.yaml").json()["data"]
    current = planned["tasks"]["build"]["definitionFingerprint"]

    analyzed = cli("--output", "json", "runs", "analyze", run_id, "--db", db)
    assert analyzed.exit_code == 0, analyzed.stdout + analyzed.stderr
    assert analyzed.json()["kind"] == "LegacyRunUpgradeAnalysis"
    analysis = analyzed.json()["data"]
    assert analysis["apiVersion"] == "agentctl.dev/legacy-upgrade/v1"
    assert (analysis["terminal"], analysis["alreadyCurrent"]) == (True, False)
    assert analysis["upgradeableTasks"] == ["build"]
    assert analysis["unavailableTasks"] == ["check", "publish"]
    assert analysis["recommendedRepairRoots"] == ["check"]
    build = _tasks(analysis)["build"]
    assert build["confidence"] == "proven"
    # The older release's fingerprint covered less; the proven one is what this release
    # records for the same task when it compiles the same file.
    assert build["recordedMetadata"]["definitionFingerprint"] != current
    assert build["proposedMetadata"]["definitionFingerprint"] == current
    assert "failed" in _tasks(analysis)["check"]["reasons"][0]

    before = _rows(db)
    events = _events(cli, run_id, db)
    dry = cli("--output", "json", "runs", "upgrade", run_id, "--dry-run", "--db", db)
    assert dry.exit_code == 0, dry.stdout + dry.stderr
    assert dry.json()["kind"] == "LegacyRunUpgrade"
    assert dry.json()["data"]["upgradedTasks"] == ["build"]
    assert dry.json()["data"]["dryRun"] is True
    assert _rows(db) == before
    assert _events(cli, run_id, db) == events

    upgraded = cli("--output", "json", "runs", "upgrade", run_id, "--db", db)
    assert upgraded.exit_code == 0, upgraded.stdout + upgraded.stderr
    data = upgraded.json()["data"]
    assert data["upgradedTasks"] == ["build"]
    assert data["upgradeId"].startswith("upgrade-")
    assert data["analysisAfter"]["alreadyCurrent"] is True
    assert {row[0]: row[1] for row in _rows(db)}["build"] == current
    assert _events(cli, run_id, db) == [*events, "run.upgraded"]

    again = cli("--output", "json", "runs", "upgrade", run_id, "--db", db)
    assert again.exit_code == 0
    assert again.json()["data"]["upgradedTasks"] == []
    assert _events(cli, run_id, db) == [*events, "run.upgraded"]
    # The upgraded record is still reused by a repair of the unchanged workflow.
    repair = cli("--output", "json", "repair", workspace / "wf.yaml", run_id, "--plan", "--db", db)
    assert repair.exit_code == 0, repair.stdout + repair.stderr
    actions = {t["taskId"]: t["action"] for t in repair.json()["data"]["tasks"]}
    assert actions["build"] == "reuse"


def test_an_unfinished_recorded_run_is_analyzed_but_not_upgraded(cli: Any, tmp_path: Path) -> None:
    _, db, run_id = _copied("uncertain", tmp_path)
    analysis = cli("--output", "json", "runs", "analyze", run_id, "--db", db).json()["data"]
    assert analysis["terminal"] is False
    assert analysis["unavailableTasks"] == ["change", "after"]
    before = _rows(db)
    refused = cli("--output", "json", "runs", "upgrade", run_id, "--db", db)
    assert refused.exit_code == 3
    assert refused.error_json()["error"]["code"] == "run.not_terminal"
    assert _rows(db) == before
    unknown = cli("--output", "json", "runs", "analyze", "run-missing", "--db", db)
    assert unknown.exit_code == 5
    assert "run-missing" in unknown.error_json()["error"]["message"]


GENERATED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: generated}
spec:
  actions:
    set: {kind: builtin.assign}
  tasks:
    - {id: first, uses: "action:set", with: {value: 1}}
    - id: second
      uses: action:set
      needs: [first]
      with: {v: "${{ tasks.first.output.output.value }}"}
    - {id: third, uses: "action:set", needs: [second], with: {value: 3}}
    - {id: fourth, uses: "action:set", with: {value: 4}}
"""


def test_a_generated_older_shape_run_is_upgraded_where_proven(cli: Any, tmp_path: Path) -> None:
    wf = tmp_path / "wf.yaml"
    wf.write_text(GENERATED)
    db = tmp_path / "state.db"
    rolled = cli("--output", "json", "roll", wf, "--db", db)
    assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    fresh = cli("--output", "json", "runs", "analyze", run_id, "--db", db).json()["data"]
    assert fresh["alreadyCurrent"] is True and fresh["upgradeableTasks"] == []
    current = {row[0]: row[1] for row in _rows(db)}

    with sqlite3.connect(db) as conn:
        # What an older release wrote: another fingerprint rule, no input digest.
        conn.execute(
            "UPDATE tasks SET definition_fingerprint = 'sha256:older', input_digest = NULL "
            "WHERE task_id IN ('first', 'fourth')"
        )
        # A record whose output no longer matches its digest cannot be vouched for.
        conn.execute(
            'UPDATE tasks SET output_json = \'{"v":"tampered"}\', '
            "definition_fingerprint = 'sha256:older' WHERE task_id = 'second'"
        )
    conn.close()
    analysis = cli("--output", "json", "runs", "analyze", run_id, "--db", db).json()["data"]
    tasks = _tasks(analysis)
    assert analysis["upgradeableTasks"] == ["first", "fourth"]
    assert analysis["unavailableTasks"] == ["second"]
    assert analysis["recommendedRepairRoots"] == ["second"]
    assert analysis["fullyUpgradeable"] is False
    assert "digest" in tasks["second"]["reasons"][0]
    assert tasks["third"]["alreadyCurrent"] is True
    assert tasks["first"]["proposedMetadata"]["inputDigest"] is not None

    upgraded = cli("--output", "json", "runs", "upgrade", run_id, "--db", db)
    assert upgraded.exit_code == 0, upgraded.stdout + upgraded.stderr
    rows = {row[0]: row for row in _rows(db)}
    assert rows["first"][1] == current["first"] and rows["fourth"][1] == current["fourth"]
    assert rows["first"][2] is not None
    assert rows["second"][1] == "sha256:older"  # unproven: left as recorded

    with sqlite3.connect(db) as conn:
        # A run recorded before the workflow document was kept beside it.
        conn.execute("UPDATE run_workflows SET workflow_json = '{}'")
        conn.execute("UPDATE runs SET workflow_json = '{}'")
        conn.execute("UPDATE tasks SET definition_fingerprint = 'sha256:older'")
    conn.close()
    blind = cli("--output", "json", "runs", "analyze", run_id, "--db", db).json()["data"]
    assert blind["upgradeableTasks"] == []
    assert "cannot be proven" in _tasks(blind)["first"]["reasons"][0]
