"""Corrupt rows and bad arguments get named errors, never exit 1 "internal error":
corrupt records exit 5 naming the record, bad arguments exit 2 (the real CLI on real
SQLite files; the FIFO case in a subprocess, so a regression fails instead of hanging)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import run_agentctl

WRITE = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: named}
spec:
  policy: {approval: never, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - {id: save, uses: "action:save", with: {path: out/a.txt, content: hi}}
"""

GATED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: gated}
spec:
  policy: {approval: always, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - {id: save, uses: "action:save", with: {path: out/a.txt, content: hi}}
"""


def _roll(cli: Any, tmp_path: Path, text: str, db: Path) -> tuple[Any, str]:
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    result = cli("--output", "json", "roll", path, "--db", db, "--workspace", tmp_path)
    body = result.json() if result.exit_code in (0, 3) else result.error_json()
    return result, str((body.get("data") or body.get("error"))["runId"])


def _corrupt(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    conn.close()


def _assert_named(result: Any, exit_code: int, *needles: str) -> None:
    assert result.exit_code == exit_code, result.stderr
    assert "internal error" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_non_json_audit_payload(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _, run_id = _roll(cli, tmp_path, WRITE, db)
    _corrupt(db, "UPDATE audit_events SET payload_json = 'not json' WHERE seq = 2")
    _assert_named(cli("audit", run_id, "--verify", "--db", db), 5, "broken at event 2")
    _assert_named(cli("audit", run_id, "--db", db), 5, "audit event 2", run_id)


def test_non_json_effect_request(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    paused, run_id = _roll(cli, tmp_path, GATED, db)
    assert paused.exit_code == 3
    _corrupt(db, "UPDATE effects SET request_json = '{bad'")
    with sqlite3.connect(db) as conn:
        (effect_id,) = conn.execute("SELECT id FROM effects").fetchone()
    conn.close()
    _assert_named(cli("inspect", run_id, "--db", db), 5, f"effect {effect_id}")
    _assert_named(cli("resume", run_id, "--db", db), 5, f"effect {effect_id}")


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "\udcffrun"],
        ["runs", "list", "--db", "\udcff.db"],
        ["roll", "\udcff.yaml"],
    ],
)
def test_non_utf8_argument(cli: Any, args: list[str]) -> None:
    _assert_named(cli(*args), 2, "not valid UTF-8", "\\xff")


def test_too_long_db_name(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / ("x" * 300 + ".db")
    _assert_named(cli("runs", "list", "--db", db), 2, "too long")


def test_export_errors(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "state" / "r.db"
    _roll(cli, tmp_path, WRITE, db)
    listed = cli("--output", "json", "artifacts", "list", "--db", db).json()["data"]
    digest = listed["artifacts"][0]["digest"]
    _assert_named(cli("artifacts", "export", digest, "y" * 300, "--db", db), 2, "longer than")
    # A near-limit name still works: the temporary file is not named after it.
    assert cli("artifacts", "export", digest, "z" * 250, "--db", db).exit_code == 0
    (blob,) = [p for p in (tmp_path / "state" / "artifacts" / "blobs").rglob("*") if p.is_file()]
    blob.chmod(0o600)
    blob.unlink()
    blob.symlink_to(tmp_path / "wf.yaml")
    _assert_named(
        cli("artifacts", "export", digest, "copy.txt", "--db", db), 5, digest, "regular file"
    )
    assert not Path("copy.txt").exists()


def test_db_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "runtime.db"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if k != "AGENTCTL_DB"}
    result = run_agentctl(["runs", "list", "--db", str(fifo)], timeout=120, env=env)
    assert result.returncode == 2, result.stderr
    assert "not a regular file" in result.stderr


def test_db_that_is_a_directory_is_refused(cli: Any, tmp_path: Path) -> None:
    _assert_named(cli("runs", "list", "--db", tmp_path), 2, "is a directory")
