"""`roll --dry-run` runs in a throwaway copy of the workspace: the checkout is untouched and
the summary lists the files the run would have changed (with --diff, their diffs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHANGING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: changing}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [".", out]}
  actions:
    save: {kind: builtin.write}
    tidy: {kind: builtin.shell.exec, command: sh, args: ["-c", "rm old.txt && echo tidied"]}
  tasks:
    - id: report
      uses: action:save
      with: {path: out/report.txt, content: "all good\\n"}
    - id: notes
      uses: action:save
      with: {path: notes.txt, content: "line one\\nline two, edited\\n"}
    - {id: tidy, uses: "action:tidy"}
"""


def _workspace(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("line one\nline two\n")
    (workspace / "old.txt").write_text("stale\n")


def test_dry_run_changes_nothing_and_lists_what_it_would_change(
    cli: Any, write_workflow: Any, workspace: Path
) -> None:
    _workspace(workspace)
    path = write_workflow(CHANGING)
    result = cli("--output", "json", "roll", path, "--dry-run", "--diff")
    assert result.exit_code == 0, result.stderr
    assert (workspace / "notes.txt").read_text() == "line one\nline two\n"
    assert (workspace / "old.txt").exists()
    assert not (workspace / "out").exists()
    changes = result.json()["data"]["changedFiles"]
    assert [(c["path"], c["change"]) for c in changes] == [
        ("notes.txt", "modified"),
        ("old.txt", "deleted"),
        ("out/report.txt", "added"),
    ]
    assert changes[0]["diff"] == (
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n line one\n-line two\n"
        "+line two, edited\n"
    )
    assert changes[2]["diff"].endswith("+all good\n")


def test_dry_run_human_summary(cli: Any, write_workflow: Any, workspace: Path) -> None:
    _workspace(workspace)
    result = cli("roll", write_workflow(CHANGING), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "dry run: the workspace was not touched; in its copy the run changed:" in result.stdout
    assert "  M notes.txt\n  D old.txt\n  A out/report.txt" in result.stdout
    assert "+++" not in result.stdout  # diffs only with --diff
    assert (workspace / "old.txt").exists()


def test_failed_dry_run_still_reports_its_changes(
    cli: Any, write_workflow: Any, workspace: Path
) -> None:
    _workspace(workspace)
    failing = CHANGING + '    - {id: boom, uses: "action:tidy", needs: [tidy]}\n'
    result = cli("roll", write_workflow(failing), "--dry-run")
    assert result.exit_code == 4
    assert "  D old.txt" in result.stderr
    assert (workspace / "old.txt").exists()


def test_dry_run_refuses_writable_roots_outside_the_workspace(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    path = write_workflow(
        CHANGING.replace('writableRoots: [".", out]', f"writableRoots: [{outside}]")
    )
    result = cli("--output", "json", "roll", path, "--dry-run")
    assert result.exit_code == 2
    error = result.error_json()["error"]
    assert error["code"] == "dry_run.workspace_outside"
    assert str(outside) in error["message"]
