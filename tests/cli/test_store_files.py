"""The database file as operators handle it: modes they set, read-only copies."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "reference"


def test_a_read_only_database_is_read_and_never_made_writable(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "frozen.db"
    rolled = cli("--output", "json", "roll", REFERENCE / "25_1.yaml", "--db", db)
    assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
    run_id = rolled.json()["data"]["runId"]
    db.chmod(0o444)
    before = db.read_bytes()
    listed = cli("--output", "json", "runs", "list", "--db", db)
    assert listed.exit_code == 0, listed.stdout + listed.stderr
    assert [r["runId"] for r in listed.json()["data"]["runs"]] == [run_id]
    assert cli("inspect", run_id, "--db", db).exit_code == 0
    assert stat.S_IMODE(db.stat().st_mode) == 0o444
    refused = cli("--output", "json", "roll", REFERENCE / "25_1.yaml", "--db", db)
    assert refused.exit_code == 5, refused.stdout + refused.stderr
    error = refused.error_json()["error"]
    assert error["code"] == "store.read_only" and "read-only" in error["message"]
    assert stat.S_IMODE(db.stat().st_mode) == 0o444
    assert db.read_bytes() == before


def test_an_operators_mode_on_a_writable_database_is_kept(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    assert cli("roll", REFERENCE / "25_1.yaml", "--db", db).exit_code == 0
    db.chmod(0o640)
    assert cli("roll", REFERENCE / "25_1.yaml", "--db", db).exit_code == 0
    assert stat.S_IMODE(db.stat().st_mode) == 0o640
