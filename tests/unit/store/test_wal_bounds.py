"""The write-ahead log a store leaves behind is bounded (docs/performance.md): every
writable connection checkpoints automatically at ``WAL_AUTOCHECKPOINT_PAGES`` and cuts the
log file back to ``JOURNAL_SIZE_LIMIT_BYTES`` when SQLite starts it over."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from agentctl.store import sqlite_connections
from agentctl.store.engine import open_store
from agentctl.store.health import wal_frames


def _pragmas(conn: object) -> tuple[int, int]:
    run = conn.exec_driver_sql  # type: ignore[attr-defined]
    return (
        int(run("PRAGMA wal_autocheckpoint").first()[0]),
        int(run("PRAGMA journal_size_limit").first()[0]),
    )


def test_every_writable_connection_bounds_the_log(tmp_path: Path) -> None:
    """The store's first connection (opened beside the revision check) and the ones made
    later, at the driver and through the engine, all carry both settings."""
    db = str(tmp_path / "runtime.db")
    open_store(db).close()
    expected = (
        sqlite_connections.WAL_AUTOCHECKPOINT_PAGES,
        sqlite_connections.JOURNAL_SIZE_LIMIT_BYTES,
    )
    assert expected[0] < 1000  # below SQLite's default, which left up to 4 MB to read back
    with open_store(db) as store:
        with store.driver_session() as session, session.read() as conn:
            assert _pragmas(conn) == expected
            with store.driver_session() as second, second.read() as other:  # a new one
                assert _pragmas(other) == expected
        with store.read() as conn:
            assert _pragmas(conn) == expected


def test_the_log_file_is_cut_back_after_a_large_transaction(tmp_path: Path) -> None:
    """One transaction larger than the limit grows the file past it (a large run's
    creation does); once SQLite starts the log over, the file is cut back to the limit
    instead of staying at its largest for as long as the database is used."""
    db = tmp_path / "runtime.db"
    limit = sqlite_connections.JOURNAL_SIZE_LIMIT_BYTES
    with open_store(str(db)) as store:
        with store.driver_session() as session:
            with session.write() as conn:
                conn.exec_driver_sql("CREATE TABLE ballast (b BLOB)")
                conn.exec_driver_sql("CREATE TABLE small (n INTEGER)")
                blob = os.urandom(64 * 1024)
                for _ in range(limit // len(blob) + 16):
                    conn.exec_driver_sql("INSERT INTO ballast VALUES (?)", (blob,))
            grown = (tmp_path / "runtime.db-wal").stat().st_size
            assert grown > limit
            conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
            with session.write() as conn:  # the next writer starts the log over
                conn.exec_driver_sql("INSERT INTO small VALUES (1)")
            assert (tmp_path / "runtime.db-wal").stat().st_size <= limit
            assert wal_frames(db) == 1  # the insert, in the log started over


def test_a_finished_run_is_in_the_database_file_alone(tmp_path: Path) -> None:
    """``drive_run`` checkpoints the log once the run finishes, while its store stays open
    (a worker's, a daemon's): a copy of the main file alone, without the ``-wal`` beside it,
    holds the finished run."""
    from agentctl.engine.driving import drive_run
    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.outcome import ExecutionOptions
    from agentctl.ids import IdGenerator, SystemClock

    steps = "".join(
        f"    - {{id: s{i}, uses: 'action:step', with: {{i: {i}}}"
        + (f", needs: [s{i - 1}]}}\n" if i else "}\n")
        for i in range(5)
    )
    (tmp_path / "wf.yaml").write_text(
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: copied}\n"
        "spec:\n  policy: {approval: never}\n  actions:\n    step: {kind: builtin.assign}\n"
        "  tasks:\n" + steps
    )
    db = tmp_path / "runtime.db"
    clock = SystemClock()
    with open_store(str(db)) as store:
        run_id = create_run(
            store, prepare_run(str(tmp_path / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
        )
        outcome = drive_run(store, run_id, ExecutionOptions(), clock=clock)
        assert outcome.state == "succeeded"
        assert wal_frames(db) > 0  # the log is still there, its frames copied
        copy = tmp_path / "copy" / "runtime.db"
        copy.parent.mkdir()
        copy.write_bytes(db.read_bytes())
    conn = sqlite3.connect(f"file:{copy}?mode=ro&immutable=1", uri=True)
    try:
        assert conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == (
            "succeeded",
        )
        assert (
            conn.execute("SELECT count(*) FROM tasks WHERE status = 'succeeded'").fetchone()[0] == 5
        )
    finally:
        conn.close()
