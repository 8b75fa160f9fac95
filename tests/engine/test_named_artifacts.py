"""Named artifacts: a task declares the files it produces; each success records a version
that later tasks read in templates and operators list and export by name."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: named}}
spec:
  policy: {{approval: never, writableRoots: [out], processAllowlist: [sh]}}
  actions:
    make: {{kind: builtin.shell.exec, command: sh, args: ["-c", "{script}"]}}
    save: {{kind: builtin.write}}
  tasks:
    - id: make
      uses: action:make
      artifacts: [{{name: report, path: out/report.md}}]
    - id: use
      uses: action:save
      needs: [make]
      with:
        path: out/seen.txt
        content: "${{{{ tasks.make.artifacts.report.digest }}}} v${{{{ tasks.make.artifacts.report.version }}}} ${{{{ tasks.make.artifacts.report.path }}}}"
"""

WRITE = "mkdir -p out && printf %s {text} > out/report.md"


def _roll(cli: Any, workspace: Path, db: Path, script: str) -> Any:
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(script=script))
    return cli("--output", "json", "roll", path, "--db", db)


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_each_success_records_a_version_that_later_tasks_read(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    first = _roll(cli, workspace, db, WRITE.format(text="first"))
    assert first.exit_code == 0, first.stderr
    assert (workspace / "out" / "seen.txt").read_text() == f"{_sha('first')} v1 out/report.md"
    second = _roll(cli, workspace, db, WRITE.format(text="second"))
    assert second.exit_code == 0, second.stderr
    assert (workspace / "out" / "seen.txt").read_text() == f"{_sha('second')} v2 out/report.md"

    versions = cli("--output", "json", "artifacts", "versions", "report", "--db", db)
    assert versions.exit_code == 0, versions.stderr
    listed = versions.json()["data"]["versions"]
    assert [(v["version"], v["digest"], v["size"], v["taskId"]) for v in listed] == [
        (1, _sha("first"), 5, "make"),
        (2, _sha("second"), 6, "make"),
    ]
    assert [v["runId"] for v in listed] == [
        first.json()["data"]["runId"],
        second.json()["data"]["runId"],
    ]
    human = cli("artifacts", "versions", "report", "--db", db)
    assert "v2" in human.stdout and _sha("second")[:19] in human.stdout


def test_a_declared_file_missing_after_success_fails_the_task(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    result = _roll(cli, workspace, db, "true")
    assert result.exit_code == 4, result.stdout + result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "artifact.not_written"
    assert "artifact `report`" in error["message"] and "out/report.md" in error["message"]
    tasks = cli("--output", "json", "inspect", error["runId"], "--db", db).json()["data"]["tasks"]
    make = next(t for t in tasks if t["taskId"] == "make")
    assert (make["state"], make["error"]["code"]) == ("failed", "artifact.not_written")
    assert cli("--output", "json", "artifacts", "versions", "report", "--db", db).exit_code == 5


def test_export_by_name_and_version_to_any_operator_path(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    assert _roll(cli, workspace, db, WRITE.format(text="first")).exit_code == 0
    assert _roll(cli, workspace, db, WRITE.format(text="second")).exit_code == 0
    elsewhere = tmp_path / "elsewhere" / "deep"  # outside the current directory
    latest = cli("--output", "json", "artifacts", "export", "report", elsewhere / "r.md", "--db", db)
    assert latest.exit_code == 0, latest.stderr
    assert (elsewhere / "r.md").read_text() == "second"
    assert latest.json()["data"]["version"] == 2
    older = cli("artifacts", "export", "report@1", "../elsewhere/old.md", "--db", db)
    assert older.exit_code == 0, older.stderr
    assert (tmp_path / "elsewhere" / "old.md").read_text() == "first"
    again = cli("--output", "json", "artifacts", "export", "report@1", elsewhere / "r.md", "--db", db)
    assert again.exit_code == 2
    assert again.error_json()["error"]["code"] == "artifact.destination_exists"
    assert (elsewhere / "r.md").read_text() == "second"
    forced = cli("artifacts", "export", "report@1", elsewhere / "r.md", "--force", "--db", db)
    assert forced.exit_code == 0, forced.stderr
    assert (elsewhere / "r.md").read_text() == "first"
    missing = cli("--output", "json", "artifacts", "export", "report@7", tmp_path / "x", "--db", db)
    assert missing.exit_code == 5
    assert "report@7" in missing.stderr + missing.stdout
    assert not (tmp_path / "x").exists()


def test_plans_without_artifacts_keep_their_bytes_and_declared_ones_are_in_the_plan(
    cli: Any, workspace: Path
) -> None:
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(script="true"))
    plan = cli("--output", "json", "plan", path)
    assert plan.exit_code == 0, plan.stderr
    text = json.dumps(plan.json())
    assert '"artifacts": [{"name": "report", "path": "out/report.md"}]' in text
