"""The PostgreSQL store on a real server: one Alembic history, version safety, the write
lock, URLs that are never files."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect, select

from agentctl.errors import NewerSchemaError, PersistenceError
from agentctl.store import migrate
from agentctl.store.engine import StoreSettings, open_store
from agentctl.store.records import get_run
from agentctl.store.run_tables import runs, tasks
from agentctl.store.tables import metadata
from tests.pg.backends import execute, rows
from tests.pg.cluster import Cluster

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def empty_url(postgres_cluster: Cluster) -> Iterator[str]:
    """A database with no schema at all."""
    url = postgres_cluster.create_database("empty")
    try:
        yield url
    finally:
        postgres_cluster.drop_database(url)


def _insert_run(conn: Any, run_id: str = "run-1") -> None:
    conn.execute(
        insert(runs).values(
            id=run_id,
            workflow_name="wf",
            workflow_digest="sha256:a",
            plan_digest="sha256:b",
            plan_json="{}",
            status="running",
            created_at=NOW,
            updated_at=NOW,
        )
    )


def _declared_in_metadata(name: str | None, type_: str, _parent: object) -> bool:
    # Migration 0003_memory_search adds the generation counter table, its trigger and a
    # full-text expression index; SQLAlchemy metadata cannot declare them.
    return not (name is not None and name.startswith("memory_search_"))


def test_upgrade_from_empty_produces_exactly_the_metadata(empty_url: str) -> None:
    with open_store(empty_url) as store:
        assert store.revision() == migrate.head_revision()
        with store.read() as conn:
            assert {t.name for t in metadata.sorted_tables} <= set(inspect(conn).get_table_names())
            context = MigrationContext.configure(conn, opts={"include_name": _declared_in_metadata})
            assert compare_metadata(context, metadata) == []


def test_downgrade_to_base_and_back_with_rows(empty_url: str) -> None:
    with open_store(empty_url) as store:
        with store.write() as conn:
            _insert_run(conn)
            conn.execute(
                insert(tasks).values(run_id="run-1", task_id="t", ordinal=0, status="pending")
            )
        with store.write() as conn:
            migrate.downgrade(conn, "base")
        assert store.revision() is None
        with store.write() as conn:
            migrate.upgrade(conn)
        assert store.revision() == migrate.head_revision()
        with store.read() as conn:
            assert conn.execute(select(runs)).all() == []


def test_upgrade_from_the_first_revision_keeps_rows(empty_url: str) -> None:
    with open_store(empty_url) as store:
        with store.write() as conn:
            migrate.downgrade(conn, "0001_initial")
        with store.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json,"
                " status, created_at, updated_at) VALUES ('run-old', 'wf', 'a', 'b', '{}',"
                " 'succeeded', '2026-01-01', '2026-01-01')"
            )
            conn.exec_driver_sql(
                "INSERT INTO memory_entries (namespace, key, value_type, value_json, text,"
                " created_at, updated_at) VALUES ('n', 'k', 'text', '\"x\"', 'old words',"
                " '2026-01-01', '2026-01-01')"
            )
    with open_store(empty_url) as store, store.read() as conn:
        assert store.revision() == migrate.head_revision()
        row = get_run(conn, "run-old")
        assert row["workflow_json"] == "{}" and row["status"] == "succeeded"
        assert row["owner_token"] == 0
    # Entries that existed before the search revision are counted in their namespace.
    assert rows(empty_url, "SELECT namespace, generation FROM memory_search_generations") == [
        ("n", 1)
    ]


def test_an_unknown_future_revision_is_refused_and_nothing_changes(empty_url: str) -> None:
    open_store(empty_url).close()
    execute(empty_url, "UPDATE alembic_version SET version_num = '9999_from_the_future'")
    with pytest.raises(NewerSchemaError) as info:
        open_store(empty_url)
    assert "9999_from_the_future" in info.value.message and info.value.exit_code == 5
    assert rows(empty_url, "SELECT version_num FROM alembic_version") == [("9999_from_the_future",)]


def test_a_second_writer_waits_for_the_write_lock_then_fails_clearly(postgres_url: str) -> None:
    first = open_store(postgres_url)
    second = open_store(postgres_url, settings=StoreSettings(busy_timeout_ms=100))
    try:
        with first.write():
            # No statement of the transaction ran yet, but the write lock is already held.
            with pytest.raises(PersistenceError) as info, second.write() as conn:
                _insert_run(conn)
            assert info.value.code == "store.locked"
            with second.read() as conn:  # readers are never blocked
                assert conn.execute(select(runs)).all() == []
    finally:
        first.close()
        second.close()


def test_every_kind_of_transaction_begins_the_same_at_the_driver(postgres_url: str) -> None:
    """A driver-level read (a finished run's outcome is read through it) is one snapshot,
    like ``Store.read()``; it used to begin a READ COMMITTED transaction, where each
    statement sees whatever committed last. A driver-level write holds the write lock,
    like ``Store.write()``, and a row-lock write does not."""
    store = open_store(postgres_url)
    try:
        show = "SHOW transaction_isolation"
        with store.driver_session() as session, session.read() as conn:
            driver_read = conn.exec_driver_sql(show).first()[0]
        with store.read() as conn:
            engine_read = conn.exec_driver_sql(show).first()[0]
        assert driver_read == engine_read == "repeatable read"
        held = (
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        with store.driver_session() as session, session.write() as conn:
            assert conn.exec_driver_sql(held).first()[0] == 1
        with store.write() as conn:
            assert conn.exec_driver_sql(held).first()[0] == 1
        with store.row_write() as conn:
            assert conn.exec_driver_sql(held).first()[0] == 0
            assert conn.exec_driver_sql(show).first()[0] == "read committed"
    finally:
        store.close()


def test_a_postgres_url_is_migrated_and_never_created_as_a_file(cli: Any, empty_url: str) -> None:
    migrated = cli("--output", "json", "db", "migrate", "--db", empty_url)
    assert migrated.exit_code == 0, migrated.stdout + migrated.stderr
    data = migrated.json()["data"]
    assert data["fromRevision"] is None and data["toRevision"] == migrate.head_revision()
    short = empty_url.replace("postgresql://", "postgres://", 1)  # libpq's short form
    again = cli("--output", "json", "db", "migrate", "--db", short)
    assert again.json()["data"]["changed"] is False
    stats = cli("--output", "json", "db", "stats", "--db", empty_url)
    assert stats.exit_code == 0, stats.stdout + stats.stderr
    assert stats.json()["data"]["journalMode"] == "postgresql"
    assert list(Path.cwd().iterdir()) == []


def test_an_unreachable_server_is_a_clear_error_and_no_file(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the probe closes
    monkeypatch.setenv("AGENTCTL_DB", f"postgresql://agentctl:secret@127.0.0.1:{port}/none")
    result = cli("--output", "json", "db", "migrate")
    assert result.exit_code == 5, result.stdout + result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "store.unreachable"
    assert f"127.0.0.1:{port}" in error["message"] and "secret" not in result.stderr
    assert list(Path.cwd().iterdir()) == []


def test_a_driver_sessions_results_outlive_its_next_statement(postgres_url: str) -> None:
    """Driver sessions on PostgreSQL run their statements on one cursor kept with the
    pooled connection (a cursor per statement cost a claimed task more CPU than sending
    it): each result is taken when its statement returns, so a result read after the
    next statement, or after the session, still holds its own rows and counts."""
    store = open_store(postgres_url)
    try:
        with store.write() as conn:
            _insert_run(conn, "run-a")
            _insert_run(conn, "run-b")
        with store.driver_session() as session, session.write() as conn:
            listed = conn.exec_driver_sql("SELECT id FROM runs ORDER BY id", ())
            one = conn.exec_driver_sql("SELECT id FROM runs WHERE id = %s", ("run-b",))
            changed = conn.exec_driver_sql(
                "UPDATE runs SET status = %s WHERE status = %s", ("paused", "running")
            )
            nothing = conn.exec_driver_sql("SELECT id FROM runs WHERE id = %s", ("none",))
        assert [tuple(row) for row in listed] == [("run-a",), ("run-b",)]
        assert listed.rowcount == 2
        assert one.first()[0] == "run-b"
        assert changed.rowcount == 2 and list(changed) == []
        assert nothing.first() is None and nothing.rowcount == 0
        # The next session on the pooled connection starts from a clean cursor.
        with store.driver_session() as session:
            again = session.exec_driver_sql(
                "SELECT count(*) FROM runs WHERE status = %s", ("paused",)
            )
            assert again.first()[0] == 2
    finally:
        store.close()


class _Clock:
    """``time`` for the store's modules, with a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleep = time.sleep

    def monotonic(self) -> float:
        return self.now


def test_an_idle_connection_is_kept_between_sessions_and_pinged_once_it_sat(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver session's connection given back idle is kept by the store for the next
    session (the pool's check-out and check-in cost a worker more CPU than a statement),
    for at most KEEP_SECONDS; one kept longer goes back to the pool as idle since its
    last session, so the pool pings it when that was PING_AFTER_IDLE_SECONDS ago (a
    server restarted meanwhile). A connection given back inside a transaction is never
    kept: the pool rolls it back."""
    import psycopg

    from agentctl.store import postgres, runner

    clock = _Clock()
    monkeypatch.setattr(runner, "time", clock)
    monkeypatch.setattr(postgres, "time", clock)
    sent: list[str] = []
    execute_ = psycopg.Cursor.execute

    def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute_(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    store = open_store(postgres_url)
    pid = "SELECT pg_backend_pid()"
    try:
        with store.driver_session() as session:
            first = session.exec_driver_sql(pid).first()[0]
        clock.now += runner.KEEP_SECONDS / 2
        with store.driver_session() as session:
            assert session.exec_driver_sql(pid).first()[0] == first
        assert ";" not in sent
        # Given back, then left longer than both limits: back to the pool, then pinged.
        clock.now += postgres.PING_AFTER_IDLE_SECONDS + 0.5
        with store.driver_session() as session:
            assert session.exec_driver_sql(pid).first()[0] == first
        assert sent.count(";") == 1
        # Left inside a transaction: not kept, and the pool's reset rolled it back.
        with store.driver_session() as session:
            session.exec_driver_sql("BEGIN")
            session.exec_driver_sql("CREATE TEMPORARY TABLE left_open (n int)")
        with store.driver_session() as session:
            open_ = session.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND state LIKE 'idle in transaction%%'"
            )
            assert open_.first()[0] == 0
            assert session.exec_driver_sql("SELECT to_regclass('left_open')").first()[0] is None
    finally:
        store.close()
