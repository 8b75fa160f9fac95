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


def test_a_parked_run_is_in_the_main_file_while_another_connection_holds_the_db(
    cli: Any, tmp_path: Path
) -> None:
    import shutil
    import sqlite3

    ws = tmp_path / "ws"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "incident.txt").write_text("x")
    (ws / "wf.yaml").write_text((REFERENCE / "25_2.yaml").read_text())
    db = tmp_path / "r.db"
    assert cli("db", "migrate", "--db", db).exit_code == 0
    watcher = sqlite3.connect(db)  # an idle reader keeps the database open
    try:
        watcher.execute("SELECT COUNT(*) FROM runs").fetchall()
        paused = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
        assert paused.exit_code == 3, paused.stdout + paused.stderr
        run_id = paused.json()["data"]["runId"]
        copy = tmp_path / "copy.db"
        shutil.copyfile(db, copy)  # the main file alone, as an operator might copy it
    finally:
        watcher.close()
    with sqlite3.connect(copy) as conn:
        row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        started = conn.execute(
            "SELECT COUNT(*) FROM effects WHERE run_id = ?", (run_id,)
        ).fetchone()
    conn.close()
    assert row == ("paused",) and started[0] >= 1


def test_db_check_reports_a_sound_database(cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert cli("roll", REFERENCE / "25_1.yaml", "--db", db).exit_code == 0
    checked = cli("--output", "json", "db", "check", "--db", db)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    data = checked.json()["data"]
    assert data["ok"] and data["integrity"] == ["ok"] and data["auditChains"]["checked"] == 1


def test_a_damaged_database_is_reported_and_no_run_starts_on_it(cli: Any, tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "r.db"
    assert cli("roll", REFERENCE / "25_1.yaml", "--db", db).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'ix_runs_created_at'"
        ).fetchone()
    conn.close()
    with open(db, "r+b") as handle:  # scribble over one index page
        handle.seek((root - 1) * page_size + 8)
        handle.write(b"\xff" * 64)
    checked = cli("--output", "json", "db", "check", "--db", db)
    assert checked.exit_code == 5, checked.stdout + checked.stderr
    assert checked.error_json()["error"]["code"] in ("store.damaged", "store.corrupt")
    refused = cli("--output", "json", "roll", REFERENCE / "25_1.yaml", "--db", db)
    assert refused.exit_code == 5, refused.stdout + refused.stderr
    error = refused.error_json()["error"]
    assert error["code"] == "store.damaged" and "db check" in error["hint"]
