"""SQLite errors are classified by SQLite's result codes, never by message text
(agentctl/store/errors.py): each class made for real on a real database file."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentctl.errors import PersistenceError
from agentctl.store.engine import StoreSettings, open_store
from agentctl.store.errors import driver_error, open_error, sqlite_code


def _raised(work: Callable[[], object]) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as caught:
        work()
    return caught.value


def _classified(db: Path, work: Callable[[], object]) -> PersistenceError:
    error = _raised(work)
    assert sqlite_code(error) is not None  # the driver reported SQLite's code
    return driver_error(str(db), error)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE CHECK (name != 'bad'), "
        "parent INTEGER REFERENCES t (id))"
    )
    conn.execute("INSERT INTO t VALUES (1, 'a', NULL)")
    conn.execute("INSERT INTO t VALUES (5, 'e', NULL)")
    yield path, conn
    conn.close()


def test_busy_is_locked(db: tuple[Path, sqlite3.Connection]) -> None:
    path, conn = db
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    conn.execute("BEGIN IMMEDIATE")
    try:
        error = _classified(path, lambda: other.execute("BEGIN IMMEDIATE"))
    finally:
        conn.execute("ROLLBACK")
        other.close()
    assert error.code == "store.locked" and "SQLITE_BUSY" in str(error)


def test_a_locked_table_is_locked(db: tuple[Path, sqlite3.Connection]) -> None:
    path, conn = db
    reading = conn.execute("SELECT * FROM t")
    reading.fetchone()  # a statement still running holds the table
    error = _classified(path, lambda: conn.execute("DROP TABLE t"))
    reading.close()
    assert error.code == "store.locked" and "SQLITE_LOCKED" in str(error)


@pytest.mark.parametrize(
    ("statement", "name", "meaning"),
    [
        ("INSERT INTO t VALUES (2, 'a', NULL)", "UNIQUE", "already holds a record"),
        ("INSERT INTO t VALUES (1, 'b', NULL)", "PRIMARYKEY", "already holds a record"),
        ("INSERT INTO t VALUES (3, 'c', 99)", "FOREIGNKEY", "holds no record"),
        ("INSERT INTO t VALUES (4, 'bad', NULL)", "CHECK", "refused a value"),
    ],
)
def test_each_constraint_is_a_constraint(
    db: tuple[Path, sqlite3.Connection], statement: str, name: str, meaning: str
) -> None:
    path, conn = db
    error = _classified(path, lambda: conn.execute(statement))
    assert error.code == "store.constraint", error
    assert f"SQLITE_CONSTRAINT_{name}" in str(error) and meaning in str(error)


def test_a_damaged_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [("y" * 100,) for _ in range(1000)])
    conn.close()
    data = bytearray(path.read_bytes())
    data[4096 : 3 * 4096] = b"\xff" * (2 * 4096)  # pages past the header overwritten
    path.write_bytes(bytes(data))
    reader = sqlite3.connect(path)
    error = _classified(path, lambda: reader.execute("SELECT count(*), max(x) FROM t").fetchall())
    reader.close()
    assert error.code == "store.corrupt" and "SQLITE_CORRUPT" in str(error)


def test_not_a_database_by_its_code(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    path.write_bytes(b"x" * 4096)
    reader = sqlite3.connect(path)
    error = _raised(lambda: reader.execute("SELECT 1 FROM sqlite_master"))
    reader.close()
    assert driver_error(str(path), error).code == "store.corrupt"
    assert open_error(path, error).code == "store.not_a_database"


def test_a_full_database_is_disk_full(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE b (x)")
    conn.execute("PRAGMA max_page_count = 3")  # the file may not grow past three pages
    error = _classified(path, lambda: conn.execute("INSERT INTO b VALUES (?)", (b"x" * 65536,)))
    conn.close()
    assert error.code == "store.disk_full" and "SQLITE_FULL" in str(error)


def test_an_unreadable_journal_is_an_io_error(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    (tmp_path / "j.db-journal").mkdir()  # where the rollback journal must be written
    error = _classified(path, lambda: conn.execute("INSERT INTO t VALUES (1)"))
    conn.close()
    assert error.code == "store.io_error" and "SQLITE_IOERR" in str(error)


def test_an_error_without_a_result_code_is_a_database_error(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.close()
    error = _raised(lambda: conn.execute("SELECT 1"))  # the driver's own: closed
    assert sqlite_code(error) is None
    assert driver_error("c.db", error).code == "store.database_error"


def test_the_store_reports_a_held_lock_by_its_code(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    settings = StoreSettings(busy_timeout_ms=0)
    with open_store(str(path), settings=settings) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(PersistenceError) as caught, store.write():
                pass
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert caught.value.code == "store.locked"
