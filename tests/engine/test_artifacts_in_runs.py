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
