"""Files a run writes become verified, versioned artifacts; missing bytes block reuse."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: reports}}
spec:
  policy: {{approval: never, writableRoots: [out], processAllowlist: [sh]}}
  actions:
    save: {{kind: builtin.write}}
    gate: {{kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}}
  tasks:
    - id: report
      uses: action:save
      with: {{path: out/report.txt, content: "{content}"}}
    - {{id: check, uses: "action:gate", needs: [report]}}
"""


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    conn.close()
    return int(count)


def test_written_files_become_versioned_artifacts(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "ready").write_text("")
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(content="first"))
    first = cli("--output", "json", "roll", path, "--db", db).json()["data"]["runId"]
    path.write_text(WORKFLOW.format(content="second"))
    second = cli("--output", "json", "roll", path, "--db", db).json()["data"]["runId"]
    listed = cli("--output", "json", "artifacts", "list", "--db", db)
    assert listed.exit_code == 0, listed.stderr
    inspection = cli("--output", "json", "inspect", second, "--db", db).json()["data"]
    (artifact,) = inspection["artifacts"]
    assert (artifact["name"], artifact["version"], artifact["taskId"]) == (
        "out/report.txt",
        2,
        "report",
    )
    first_artifacts = cli("--output", "json", "inspect", first, "--db", db).json()["data"][
        "artifacts"
    ]
    assert first_artifacts[0]["version"] == 1
    assert first_artifacts[0]["digest"] != artifact["digest"]
    assert cli("artifacts", "verify", "--all", "--db", db).exit_code == 0
    exported = Path("copy.txt")  # export writes inside the current directory
    assert (
        cli("artifacts", "export", first_artifacts[0]["digest"], exported, "--db", db).exit_code
        == 0
    )
    assert exported.read_text() == "first"


def test_missing_artifact_bytes_block_reuse_before_any_run(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(content="kept"))
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4
    source = failed.error_json()["error"]["runId"]
    (artifact,) = cli("--output", "json", "inspect", source, "--db", db).json()["data"]["artifacts"]
    digest = artifact["digest"].removeprefix("sha256:")
    (blob,) = [
        p
        for p in (tmp_path / "state" / "artifacts").rglob("*")
        if p.is_file()
        and digest in p.name
        or (p.is_file() and p.parent.name == digest[:2] and p.name.startswith(digest[2:6]))
    ]
    blob.write_text("tampered")
    (workspace / "ready").write_text("")
    before = _runs(db)
    planned = cli("--output", "json", "retry", path, source, "--failed", "--plan", "--db", db)
    assert planned.exit_code == 3
    decision = {t["taskId"]: t for t in planned.json()["data"]["tasks"]}["report"]
    assert decision["action"] == "blocked" and "artifact" in decision["reason"]
    refused = cli("--output", "json", "retry", path, source, "--failed", "--db", db)
    assert refused.exit_code == 3
    assert _runs(db) == before
    assert cli("artifacts", "verify", "--all", "--db", db).exit_code == 5


def test_files_a_process_writes_under_writable_roots_are_ingested(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow("""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {name: generate}
        spec:
          policy: {approval: never, writableRoots: [out], processAllowlist: [sh]}
          actions:
            gen:
              kind: builtin.shell.exec
              command: sh
              args: ["-c", "mkdir -p out/sub && echo one > out/a.txt && echo two > out/sub/b.txt"]
          tasks:
            - {id: generate, uses: "action:gen"}
    """)
    db = tmp_path / "state" / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["data"]["runId"]
    artifacts = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]["artifacts"]
    assert sorted(a["name"] for a in artifacts) == ["out/a.txt", "out/sub/b.txt"]


PARKING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: reports}
spec:
  policy: {approval: never, writableRoots: [out], processAllowlist: [sh]}
  actions:
    save: {kind: builtin.write}
    gate: {kind: builtin.shell.exec, command: sh, args: ["-c", "test -f ready"]}
    ask: {kind: builtin.ask}
  tasks:
    - id: report
      uses: action:save
      with: {path: out/report.txt, content: "kept"}
    - {id: check, uses: "action:gate", needs: [report]}
    - id: confirm
      uses: action:ask
      needs: [check]
      with: {prompt: "ship it?", choices: [yes, no]}
"""


def test_a_retry_run_keeps_its_artifacts_after_the_source_run_is_collected(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(PARKING)
    failed = cli("--output", "json", "roll", path, "--db", db)
    assert failed.exit_code == 4, failed.stdout + failed.stderr
    source = failed.error_json()["error"]["runId"]
    (workspace / "ready").write_text("")
    retried = cli("--output", "json", "retry", path, source, "--failed", "--db", db)
    assert retried.exit_code == 3, retried.stdout + retried.stderr  # parked on the question
    retry_id = retried.json()["data"]["runId"]
    (listed,) = cli("--output", "json", "inspect", retry_id, "--db", db).json()["data"]["artifacts"]
    assert listed["taskId"] == "report"
    # The source run goes; the parked retry run survives and still lists the report.
    assert cli("gc", "--older-than-days", "0", "--db", db).exit_code == 0
    assert _runs(db) == 1
    assert cli("artifacts", "gc", "--older-than-days", "0", "--db", db).exit_code == 0
    assert cli("artifacts", "verify", "--all", "--db", db).exit_code == 0
    exported = Path("kept.txt")
    assert cli("artifacts", "export", listed["digest"], exported, "--db", db).exit_code == 0
    assert exported.read_text() == "kept"
    (question,) = retried.json()["data"]["pendingApprovals"]
    assert cli("approvals", "answer", question, '"yes"', "--db", db).exit_code == 0
    finished = cli("resume", retry_id, "--db", db)
    assert finished.exit_code == 0, finished.stdout + finished.stderr


def test_a_replay_lists_the_artifacts_of_its_source(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "ready").write_text("")
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(content="replayed"))
    source = cli("--output", "json", "roll", path, "--db", db).json()["data"]["runId"]
    replayed = cli("--output", "json", "replay", source, "--db", db)
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    replay_id = replayed.json()["data"]["runId"]
    (artifact,) = cli("--output", "json", "inspect", replay_id, "--db", db).json()["data"][
        "artifacts"
    ]
    assert artifact["taskId"] == "report"
    with sqlite3.connect(db) as conn:
        (manifest,) = conn.execute(
            "SELECT artifact_manifest_json FROM tasks WHERE run_id = ? AND task_id = 'report'",
            (replay_id,),
        ).fetchone()
    conn.close()
    assert manifest is not None and "report.txt" in manifest


def test_a_new_run_repairs_a_same_size_corrupt_blob_instead_of_pointing_at_it(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "ready").write_text("")
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(content="same bytes"))
    first = cli("--output", "json", "roll", path, "--db", db).json()["data"]["runId"]
    (artifact,) = cli("--output", "json", "inspect", first, "--db", db).json()["data"]["artifacts"]
    hex_ = artifact["digest"].removeprefix("sha256:")
    blob = tmp_path / "state" / "artifacts" / "blobs" / hex_[:2] / hex_[2:]
    blob.chmod(0o600)
    blob.write_text("SAME BYTES")  # same size, other bytes: dedup by size would trust it
    assert cli("artifacts", "verify", "--all", "--db", db).exit_code == 5
    (workspace / "out" / "report.txt").unlink()  # the second run writes the same bytes anew
    second = cli("--output", "json", "roll", path, "--db", db)
    assert second.exit_code == 0, second.stderr
    (again,) = cli(
        "--output", "json", "inspect", second.json()["data"]["runId"], "--db", db
    ).json()["data"]["artifacts"]
    assert again["digest"] == artifact["digest"]
    assert blob.read_text() == "same bytes"
    verified = cli("artifacts", "verify", "--all", "--db", db)
    assert verified.exit_code == 0, verified.stdout + verified.stderr


PROCESS_REPORT = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: process-report}
spec:
  policy: {approval: never, writableRoots: [out], processAllowlist: [sh]}
  actions:
    build:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "mkdir -p out; echo built > out/report.txt; echo ran >> counter"]
  tasks:
    - {id: build, uses: "action:build"}
"""


def _roll_killed_after_the_effect(workspace: Path, db: Path) -> str:
    import json
    import os

    from tests.forkserver import run_agentctl

    killed = run_agentctl(
        ["--output", "json", "roll", "wf.yaml", "--db", str(db)],
        cwd=workspace,
        env={**os.environ, "AGENTCTL_FAULT": "effect.finished"},
        timeout=120,
    )
    assert killed.returncode == -9, killed.stdout + killed.stderr
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    del json
    return str(run_id)


def test_a_resume_ingests_the_files_of_a_confirmed_process_effect(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "wf.yaml").write_text(PROCESS_REPORT)
    db = tmp_path / "state" / "r.db"
    run_id = _roll_killed_after_the_effect(workspace, db)
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stdout + resumed.stderr
    assert (workspace / "counter").read_text() == "ran\n"  # the effect was reused
    (artifact,) = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]["artifacts"]
    assert (artifact["name"], artifact["taskId"]) == ("out/report.txt", "build")
    output = resumed.json()["data"]["output"]["build"]
    assert "writtenFiles" not in output and output["exitCode"] == 0


def test_a_resume_fails_loudly_when_the_written_bytes_are_gone(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "wf.yaml").write_text(PROCESS_REPORT)
    db = tmp_path / "state" / "r.db"
    run_id = _roll_killed_after_the_effect(workspace, db)
    (workspace / "out" / "report.txt").unlink()
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 4, resumed.stdout + resumed.stderr
    assert "out/report.txt" in resumed.stdout + resumed.stderr
    assert (workspace / "counter").read_text() == "ran\n"


def test_blocked_retry_names_the_artifact_and_how_to_restore_it(
    cli: Any, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "state" / "r.db"
    path = workspace / "wf.yaml"
    path.write_text(WORKFLOW.format(content="kept"))
    failed = cli("--output", "json", "roll", path, "--db", db)
    source = failed.error_json()["error"]["runId"]
    for blob in (tmp_path / "state" / "artifacts" / "blobs").rglob("*"):
        if blob.is_file():
            blob.chmod(0o600)
            blob.unlink()
    (workspace / "ready").write_text("")
    planned = cli("--output", "json", "retry", path, source, "--failed", "--plan", "--db", db)
    decisions = {t["taskId"]: t for t in planned.json()["data"]["tasks"]}
    # The failed task is selected by --failed, not "with --from".
    assert decisions["check"]["reason"] == f"failed in {source} (--failed)"
    reason = decisions["report"]["reason"]
    assert "'out/report.txt'" in reason and "missing" in reason and "{" not in reason
    refused = cli("retry", path, source, "--failed", "--db", db)
    assert refused.exit_code == 3
    assert "'out/report.txt'" in refused.stderr and "{'" not in refused.stderr
    assert "--from report" in refused.stderr and "reconcile" not in refused.stderr
