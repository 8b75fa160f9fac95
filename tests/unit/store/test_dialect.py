"""The dialect pair (agentctl/store/dialect.py): one test per method of what the two
dialects spell differently."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import bindparam

from agentctl.store import locks
from agentctl.store.dialect import (
    POSTGRESQL_SQL,
    READ,
    ROW_LOCKS,
    SQLITE_SQL,
    WRITE,
    SqlDialect,
    sql_dialect,
)
from agentctl.store.engine import open_store
from agentctl.store.journal_tables import tool_calls
from agentctl.store.statements import compile_for


def test_each_name_has_its_member() -> None:
    assert sql_dialect("sqlite") is SQLITE_SQL and sql_dialect("postgresql") is POSTGRESQL_SQL
    with pytest.raises(ValueError, match="'mysql'"):
        sql_dialect("mysql")


def test_compiler_places_parameters_as_each_driver_takes_them() -> None:
    assert SQLITE_SQL.compiler().paramstyle == "qmark"
    assert POSTGRESQL_SQL.compiler().paramstyle == "format"


def test_begin() -> None:
    assert SQLITE_SQL.begin(WRITE) == "BEGIN IMMEDIATE"
    assert SQLITE_SQL.begin(READ) == "BEGIN"
    assert SQLITE_SQL.begin(WRITE, locks.run("r1")) == "BEGIN IMMEDIATE"  # one writer anyway
    assert POSTGRESQL_SQL.begin(READ) == "BEGIN ISOLATION LEVEL REPEATABLE READ"
    assert POSTGRESQL_SQL.begin(ROW_LOCKS) == "BEGIN"
    scoped = POSTGRESQL_SQL.begin(WRITE, locks.run("r1"))
    assert scoped.startswith("BEGIN") and "pg_advisory_xact_lock" in scoped
    assert scoped != POSTGRESQL_SQL.begin(WRITE)  # the run's lock, not the whole store's


def _insert(member: SqlDialect) -> Any:
    return member.insert_ignoring(tool_calls).values(
        id=bindparam("id"),
        format_version=1,
        run_id="r",
        task_id="t",
        effect_id=bindparam("id"),
        tool="x",
        status="requested",
        arguments_json="{}",
        created_at="2026-01-01 00:00:00.000000",
    )


def test_insert_ignoring_leaves_an_existing_row_on_sqlite(tmp_path: Path) -> None:
    compiled = compile_for(_insert(SQLITE_SQL), "sqlite")
    assert compiled.text.startswith("INSERT OR IGNORE INTO tool_calls")
    db = tmp_path / "s.db"
    open_store(str(db)).close()  # the schema
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")  # a tool call without its run, for the test
    for _ in range(2):
        conn.execute(compiled.text, compiled.parameters({"id": "e1"}))
    assert conn.execute("SELECT count(*) FROM tool_calls").fetchone() == (1,)
    conn.close()


def test_insert_ignoring_is_on_conflict_do_nothing_on_postgresql() -> None:
    compiled = compile_for(_insert(POSTGRESQL_SQL), "postgresql")
    assert compiled.text.startswith("INSERT INTO tool_calls")
    assert compiled.text.endswith("ON CONFLICT DO NOTHING")
    assert compiled.text.count("%s") == len(compiled.names)


def test_notifies() -> None:
    assert POSTGRESQL_SQL.notifies and not SQLITE_SQL.notifies


def test_only_postgresql_writes_take_advisory_locks(tmp_path: Path) -> None:
    """On SQLite a worker's try of a run's lock always succeeds (one writer holds the whole
    database); PostgreSQL's is tested on the server (tests/pg/test_run_locks.py)."""
    from agentctl.store import locks, run_queue
    from agentctl.store.engine import open_store

    assert POSTGRESQL_SQL.advisory_locks and not SQLITE_SQL.advisory_locks
    with open_store(str(tmp_path / "state.db")) as store, store.write(locks.Locks()) as conn:
        assert run_queue.try_run_lock(conn, "run-a") is True


def test_a_dialect_without_every_method_cannot_be_made() -> None:
    """What differs between dialects is abstract: a new dialect that forgets one method
    fails when it is made, not when a statement first needs the method."""
    from agentctl.store.dialect import SqlDialect, SqliteSql

    class Partial(SqlDialect):
        name = "partial"

        def compiler(self):  # type: ignore[no-untyped-def]
            return SqliteSql().compiler()

    with pytest.raises(TypeError, match="insert"):
        Partial()  # type: ignore[abstract]


def _where(sql: SqlDialect, condition: Any) -> str:
    from sqlalchemy import select

    from agentctl.store.memory_tables import memory_entries

    return compile_for(select(memory_entries.c.id).where(condition), sql.name).text


def test_unindexed_is_sqlites_unary_plus_and_the_column_on_postgresql() -> None:
    from agentctl.store.memory_tables import memory_entries

    column = memory_entries.c.namespace
    assert "(+ memory_entries.namespace) = ?" in _where(
        SQLITE_SQL, SQLITE_SQL.unindexed(column) == "n"
    )
    assert "memory_entries.namespace = %s" in _where(
        POSTGRESQL_SQL, POSTGRESQL_SQL.unindexed(column) == "n"
    )


def test_json_member_reads_a_members_stored_json_text_on_sqlite() -> None:
    """The member's JSON text compares with a canonical JSON value (PostgreSQL's is run on
    the server by tests/pg/test_memory_search_on_both.py)."""
    from sqlalchemy import bindparam, column, select

    compiled = compile_for(
        select(SQLITE_SQL.json_member(column("doc"), bindparam("name"))), "sqlite"
    )
    conn = sqlite3.connect(":memory:")
    doc = '{"a":1,"b":{"c":"x"},"d":null}'
    for key, text in (("a", "1"), ("b", '{"c":"x"}'), ("d", "null"), ("e", None)):
        values = {"name": SQLITE_SQL.json_member_name(key)}
        found = conn.execute(
            compiled.text + " FROM (SELECT ? AS doc)", (*compiled.parameters(values), doc)
        ).fetchone()
        assert found is not None and found[0] == text, key
    assert POSTGRESQL_SQL.json_member_name("a") == "a"
    assert (
        "CAST(CAST(doc AS JSON) -> %s AS TEXT)"
        in compile_for(
            select(POSTGRESQL_SQL.json_member(column("doc"), bindparam("name"))), "postgresql"
        ).text
    )


def test_memory_text_query() -> None:
    assert SQLITE_SQL.memory_text_query('"a" OR "b"', ["a", "b"], [["t1", "t2"]]) == (
        '"a" OR "b" OR "t1 t2"'
    )
    assert POSTGRESQL_SQL.memory_text_query('"a" OR "b\'c"', ["a", "b'c"], [["t1", "t2"]]) == (
        "'a' | 'b''c' | (t1 <-> t2)"
    )
    assert POSTGRESQL_SQL.memory_text_query("", [], []) is None


def test_memory_text_search_uses_each_dialects_index() -> None:
    from sqlalchemy import bindparam, select

    from agentctl.store.memory_tables import memory_entries

    def text(sql: SqlDialect) -> str:
        source, matches, score = sql.memory_text_search(memory_entries, bindparam("query"))
        return compile_for(
            select(memory_entries.c.id, score).select_from(source).where(matches), sql.name
        ).text

    assert "memory_search_fts MATCH ?" in text(SQLITE_SQL)
    assert "-bm25(memory_search_fts)" in text(SQLITE_SQL)
    # Spelled as migration 0003's GIN expression index, so the planner can use it.
    assert "to_tsvector('simple', coalesce(memory_entries.text, '')) @@" in text(POSTGRESQL_SQL)
    assert "rebuild" in compile_for(SQLITE_SQL.rebuild_memory_text_index(), "sqlite").text
    assert compile_for(POSTGRESQL_SQL.rebuild_memory_text_index(), "postgresql").text == (
        "REINDEX INDEX memory_search_text"
    )


@pytest.mark.parametrize(
    ("setting", "name"), [(0, "OFF"), (1, "NORMAL"), (2, "FULL"), (3, "EXTRA")]
)
def test_storage_settings_name_sqlites_synchronous_level(
    tmp_path: Path, setting: int, name: str
) -> None:
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={setting}")
    text = compile_for(SQLITE_SQL.storage_settings(), "sqlite").text
    assert conn.execute(text).fetchone() == ("wal", name, None)
    assert "pg_database_size(current_database())" in (
        compile_for(POSTGRESQL_SQL.storage_settings(), "postgresql").text
    )
