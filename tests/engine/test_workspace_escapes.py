"""Nothing a run writes or ingests leaves the workspace through a link: a writable root
that is a symlink to elsewhere, a symlink a process leaves under a root, a hard link to an
outside file (real runs through the CLI, real processes, real SQLite)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

WRITE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: escape}
spec:
  policy: {approval: never, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - id: save
      uses: action:save
      with: {path: out/report.txt, content: leaked}
"""

PROCESS = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: escape}}
spec:
  policy: {{approval: never, writableRoots: [out], processAllowlist: [sh]}}
  actions:
    gen: {{kind: builtin.shell.exec, command: sh, args: ["-c", "{script}"]}}
  tasks:
    - {{id: generate, uses: "action:gen"}}
"""


def _blob_count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM artifact_refs").fetchone()
    conn.close()
    return int(count)


def _roll(cli: Any, workflow: Path, db: Path) -> Any:
    return cli("--output", "json", "roll", workflow, "--db", db)


def test_a_writable_root_symlinked_outside_is_refused(
    cli: Any, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "out").symlink_to(elsewhere)
    result = _roll(cli, write_workflow(WRITE), tmp_path / "r.db")
    assert result.exit_code == 4
    message = result.error_json()["error"]["message"]
    assert "writable root `out`" in message and str(elsewhere) in message
    assert list(elsewhere.iterdir()) == []


def test_an_escaped_root_is_not_scanned_for_artifacts(
    cli: Any, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "out").symlink_to(elsewhere)
    db = tmp_path / "r.db"
    result = _roll(cli, write_workflow(PROCESS.format(script="echo data > out/x.txt")), db)
    assert result.exit_code == 0, result.stderr
    assert _blob_count(db) == 0


def test_a_symlink_left_by_a_process_fails_the_task(
    cli: Any, tmp_path: Path, write_workflow: Any
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    script = f"mkdir -p out && echo fine > out/ok.txt && ln -s {secret} out/link.txt"
    db = tmp_path / "r.db"
    result = _roll(cli, write_workflow(PROCESS.format(script=script)), db)
    assert result.exit_code == 4
    error = result.error_json()["error"]
    assert "symlink `out/link.txt`" in error["message"], error
    assert _blob_count(db) == 0


def test_a_hard_link_to_an_outside_file_is_not_ingested(
    cli: Any, tmp_path: Path, write_workflow: Any
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    db = tmp_path / "r.db"
    script = f"mkdir -p out && ln {secret} out/copy.txt"
    result = _roll(cli, write_workflow(PROCESS.format(script=script)), db)
    assert result.exit_code == 4
    assert "hard-linked" in result.error_json()["error"]["message"]
    assert _blob_count(db) == 0
    blobs = tmp_path / "artifacts"
    stored = [p.read_bytes() for p in blobs.rglob("*") if p.is_file()] if blobs.exists() else []
    assert b"top secret" not in stored


def test_hard_links_inside_the_roots_are_ingested(
    cli: Any, tmp_path: Path, workspace: Path, write_workflow: Any
) -> None:
    db = tmp_path / "r.db"
    script = "mkdir -p out && echo twin > out/a.txt && ln out/a.txt out/b.txt"
    result = _roll(cli, write_workflow(PROCESS.format(script=script)), db)
    assert result.exit_code == 0, result.stderr
    assert _blob_count(db) == 2
    assert os.stat(workspace / "out" / "a.txt").st_nlink == 2
