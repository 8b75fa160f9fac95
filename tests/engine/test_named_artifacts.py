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
        content: >-
          ${{{{ tasks.make.artifacts.report.digest }}}}
          v${{{{ tasks.make.artifacts.report.version }}}}
          ${{{{ tasks.make.artifacts.report.path }}}}
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
    latest = cli(
        "--output", "json", "artifacts", "export", "report", elsewhere / "r.md", "--db", db
    )
    assert latest.exit_code == 0, latest.stderr
    assert (elsewhere / "r.md").read_text() == "second"
    assert latest.json()["data"]["version"] == 2
    older = cli("artifacts", "export", "report@1", "../elsewhere/old.md", "--db", db)
    assert older.exit_code == 0, older.stderr
    assert (tmp_path / "elsewhere" / "old.md").read_text() == "first"
    again = cli(
        "--output", "json", "artifacts", "export", "report@1", elsewhere / "r.md", "--db", db
    )
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


CHECKED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: checked}}
spec:
  policy: {{approval: never, writableRoots: [out], processAllowlist: [sh]}}
  actions:
    make: {{kind: builtin.shell.exec, command: sh, args: ["-c", "true"]}}
    save: {{kind: builtin.write}}
  tasks:
    - id: make
      uses: action:make
      artifacts: {declared}
    - id: use
      uses: action:save
      needs: [make]
      with: {{path: out/seen.txt, content: "${{{{ {read} }}}}"}}
"""


def _check(cli: Any, workspace: Path, declared: str, read: str) -> Any:
    path = workspace / "wf.yaml"
    path.write_text(CHECKED.format(declared=declared, read=read))
    return cli("--output", "json", "check", path)


def test_the_compiler_accepts_reads_of_declared_artifacts(cli: Any, workspace: Path) -> None:
    for field in ("digest", "version", "path", "size"):
        result = _check(
            cli,
            workspace,
            "[{name: report, path: out/report.md}]",
            f"tasks.make.artifacts.report.{field}",
        )
        assert result.exit_code == 0, result.stdout


def test_the_compiler_locates_reads_of_undeclared_artifacts_and_fields(
    cli: Any, workspace: Path
) -> None:
    unknown = _check(
        cli,
        workspace,
        "[{name: report, path: out/report.md}]",
        "tasks.make.artifacts.unknown.digest",
    )
    assert unknown.exit_code == 2
    (diagnostic,) = unknown.error_json()["diagnostics"]
    assert diagnostic["code"] == "missing_reference"
    assert diagnostic["path"] == "spec.tasks[1].with.content"
    assert diagnostic["line"] == 17
    assert (
        "artifact `unknown`" in diagnostic["message"] and "only `report`" in diagnostic["message"]
    )
    field = _check(
        cli, workspace, "[{name: report, path: out/report.md}]", "tasks.make.artifacts.report.sha"
    )
    (diagnostic,) = field.error_json()["diagnostics"]
    assert (diagnostic["code"], diagnostic["line"]) == ("invalid_template", 17)
    assert "digest, version, path, size" in diagnostic["message"]
    bare = _check(cli, workspace, "[{name: report, path: out/report.md}]", "tasks.make.artifacts")
    (diagnostic,) = bare.error_json()["diagnostics"]
    assert "tasks.<id>.artifacts.<name>" in diagnostic["message"]


def test_declarations_are_validated_where_they_are_written(cli: Any, workspace: Path) -> None:
    bad = {
        "[{name: report, path: /etc/passwd}]": "not absolute",
        "[{name: report, path: ../outside.md}]": "must not contain `..`",
        "[{name: report, path: out/}]": "must name a file",
        "[{name: 9report, path: out/r.md}]": "spec.tasks[0].artifacts[0].name",
        "[{name: report, path: a.md}, {name: report, path: b.md}]": "`report` is declared more",
        "[{name: a, path: out/r.md}, {name: b, path: ./out/r.md}]": "`out/r.md` is declared more",
        "[{name: report, path: out/r.md, media: text}]": "media",
    }
    for declared, expected in bad.items():
        result = _check(cli, workspace, declared, "tasks.make.output")
        assert result.exit_code == 2, declared
        text = json.dumps(result.error_json())
        assert expected in text, (declared, text)
        assert '"line": 13' in text, (declared, text)


RETRIED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: retried}
spec:
  policy: {approval: never, writableRoots: [out], processAllowlist: [sh]}
  actions:
    make:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "mkdir -p out && printf made > out/report.md"]
    gate: {kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}
    save: {kind: builtin.write}
  tasks:
    - id: make
      uses: action:make
      artifacts: [{name: report, path: out/report.md}]
    - {id: gate, uses: "action:gate", needs: [make]}
    - id: use
      uses: action:save
      needs: [make, gate]
      with:
        path: out/seen.txt
        content: >-
          ${{ tasks.make.artifacts.report.digest }}
          v${{ tasks.make.artifacts.report.version }}
"""


def test_a_retried_run_reads_the_reused_task_s_artifact_from_the_copied_version(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(RETRIED)
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4, failed.stdout
    source = failed.error_json()["error"]["runId"]
    (workspace / "out" / "report.md").write_text("changed after the run")
    (workspace / "ready").write_text("")
    retried = cli("--output", "json", "retry", path, source, "--failed", "--db", db)
    assert retried.exit_code == 0, retried.stdout + retried.stderr
    # `make` was reused, not run again: its recorded version is copied into the new run
    # (version 2, same bytes), and that is what `use` reads.
    assert (workspace / "out" / "seen.txt").read_text() == f"{_sha('made')} v2"
    versions = cli("--output", "json", "artifacts", "versions", "report", "--db", db).json()
    listed = versions["data"]["versions"]
    assert [(v["version"], v["digest"]) for v in listed] == [(1, _sha("made")), (2, _sha("made"))]
    assert listed[1]["runId"] == retried.json()["data"]["runId"]


def test_export_never_writes_through_a_symlink_at_the_destination(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    assert _roll(cli, workspace, db, WRITE.format(text="first")).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "link.md"
    link.symlink_to(victim)
    refused = cli("--output", "json", "artifacts", "export", "report", link, "--db", db)
    assert refused.exit_code == 2
    assert refused.error_json()["error"]["code"] == "artifact.destination_exists"
    forced = cli("artifacts", "export", "report", link, "--force", "--db", db)
    assert forced.exit_code == 0, forced.stderr
    assert not link.is_symlink() and link.read_text() == "first"
    assert victim.read_text() == "keep me"


PREDICTED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: predicted}
spec:
  policy: {approval: never, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - id: make
      uses: action:save
      with: {path: out/report.md, content: hello}
      artifacts: [{name: report, path: out/report.md}]
    - id: use
      uses: action:save
      needs: [make]
      with: {path: out/seen.txt, content: "${{ tasks.make.artifacts.report.digest }}"}
"""


def test_check_mode_marks_artifact_reads_as_requiring_execution(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    path = workspace / "wf.yaml"
    path.write_text(PREDICTED)
    result = cli("--output", "json", "roll", "--check", path, "--db", tmp_path / "c.db")
    assert result.exit_code == 0, result.stdout + result.stderr
    output = result.json()["data"]["output"]
    assert output["use"]["status"] == "requires_execution"
    assert "depends on make" in output["use"]["reason"]
    assert not (workspace / "out").exists()
