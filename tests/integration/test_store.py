"""The SQLite store on real files: migrations, version safety, pragmas, file modes."""

from __future__ import annotations

import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect, select

from agentctl.errors import NewerFormatError, NewerSchemaError, NotFoundError, PersistenceError
from agentctl.store import migrate
from agentctl.store.engine import StoreSettings, open_store
from agentctl.store.records import get_run
from agentctl.store.run_tables import runs, tasks
from agentctl.store.tables import metadata

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _insert_run(conn: object, run_id: str = "run-1", format_version: int = 1) -> None:
    conn.execute(  # type: ignore[attr-defined]
        insert(runs).values(
            id=run_id,
            format_version=format_version,
            workflow_name="wf",
            workflow_digest="sha256:a",
            plan_digest="sha256:b",
            plan_json="{}",
            status="running",
            created_at=NOW,
            updated_at=NOW,
        )
    )


def test_single_head() -> None:
    assert migrate.head_revision() == migrate.SCHEMA_HEAD == "0017_hot_updates"
    assert len(migrate.known_revisions()) >= 1


def test_upgrade_from_empty_creates_every_table(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "a.db")) as store:
        assert store.revision() == migrate.head_revision()
        with store.read() as conn:
            names = set(inspect(conn).get_table_names())
    assert {t.name for t in metadata.sorted_tables} <= names


def _declared_in_metadata(name: str | None, type_: str, _parent: object) -> bool:
    # Migration 0003_memory_search adds an FTS5 virtual table (and the shadow tables SQLite
    # creates for it), a per-namespace generation counter and triggers; none of these can be
    # declared in SQLAlchemy metadata, so the comparison skips their `memory_search_` names.
    return not (type_ == "table" and name is not None and name.startswith("memory_search_"))


def test_migrations_produce_exactly_the_metadata(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "a.db")) as store, store.read() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": _declared_in_metadata})
        diff = compare_metadata(context, metadata)
    assert diff == []


def test_downgrade_to_base_and_back_with_rows(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "a.db")) as store:
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


def test_unknown_future_revision_is_refused_and_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    open_store(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(NewerSchemaError) as info:
        open_store(str(path))
    assert "9999_from_the_future" in info.value.message
    assert migrate.head_revision() in info.value.message
    assert info.value.exit_code == 5
    assert path.read_bytes() == before


def test_newer_record_format_is_refused(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "a.db")) as store:
        with store.write() as conn:
            _insert_run(conn, "run-new", format_version=99)
            _insert_run(conn, "run-ok")
        with store.read() as conn:
            assert get_run(conn, "run-ok")["workflow_name"] == "wf"
            with pytest.raises(NewerFormatError, match="format version 99"):
                get_run(conn, "run-new")
            with pytest.raises(NotFoundError, match="run-missing"):
                get_run(conn, "run-missing")


def test_files_are_private_and_parent_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "runtime.db"
    with open_store(str(path)) as store:
        with store.write() as conn:
            _insert_run(conn)
        for suffix in ("", "-wal", "-shm"):
            candidate = Path(str(path) + suffix)
            if candidate.exists():
                assert stat.S_IMODE(candidate.stat().st_mode) == 0o600, suffix
        assert Path(str(path) + "-wal").exists()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_pragmas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(str(tmp_path / "a.db")) as store, store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
    monkeypatch.setenv("AGENTCTL_SQLITE_SYNCHRONOUS", "normal")
    with open_store(str(tmp_path / "a.db")) as store, store.read() as conn:
        # An existing database: the connection opened beside the revision check, and one
        # the pool makes later, are set up alike.
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
        with store.driver_session() as session:
            for pragma, value in (
                ("journal_mode", "wal"),
                ("synchronous", 1),
                ("foreign_keys", 1),
                ("busy_timeout", 10_000),
            ):
                assert session.exec_driver_sql(f"PRAGMA {pragma}").first()[0] == value
    monkeypatch.setenv("AGENTCTL_SQLITE_SYNCHRONOUS", "sometimes")
    with pytest.raises(PersistenceError, match="AGENTCTL_SQLITE_SYNCHRONOUS"):
        open_store(str(tmp_path / "a.db"))


def test_write_transactions_take_the_lock_at_begin(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    first = open_store(path)
    second = open_store(path, settings=StoreSettings(busy_timeout_ms=50))
    try:
        with first.write():
            # No statement ran yet in `first`, but BEGIN IMMEDIATE already holds the lock.
            with pytest.raises(PersistenceError, match="locked"), second.write() as conn:
                _insert_run(conn)
            with second.read() as conn:  # readers are never blocked (WAL)
                assert conn.execute(select(runs)).all() == []
    finally:
        first.close()
        second.close()


def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "a.db")) as store:
        with pytest.raises(PersistenceError), store.write() as conn:
            conn.execute(
                insert(tasks).values(run_id="nope", task_id="t", ordinal=0, status="pending")
            )


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all, just some bytes" * 100)
    before = path.read_bytes()
    with pytest.raises(PersistenceError, match="is not an SQLite database"):
        open_store(str(path))
    assert path.read_bytes() == before


def test_in_memory_store() -> None:
    with open_store(":memory:") as store:
        with store.write() as conn:
            _insert_run(conn)
        with store.read() as conn:
            assert len(conn.execute(select(runs)).all()) == 1


def test_upgrade_from_first_revision_keeps_rows(tmp_path: Path) -> None:
    """A database written at 0001 gains the run-workflow columns with its rows intact."""
    path = tmp_path / "old.db"
    with open_store(str(path)) as store:
        with store.write() as conn:
            migrate.downgrade(conn, "0001_initial")
        with store.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json,"
                " status, created_at, updated_at) VALUES ('run-old', 'wf', 'a', 'b', '{}',"
                " 'succeeded', '2026-01-01', '2026-01-01')"
            )
    with open_store(str(path)) as store, store.read() as conn:
        assert store.revision() == migrate.head_revision()
        row = get_run(conn, "run-old")
        assert row["workflow_json"] == "{}" and row["status"] == "succeeded"


def test_schema_head_constant_matches_the_revision_files() -> None:
    assert migrate.SCHEMA_HEAD == migrate.head_revision()


def _roll_chain(path: Path, steps: int) -> str:
    """A finished run of a ``steps``-task chain in the database at ``path``."""
    import asyncio

    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.executor import RunExecutor
    from agentctl.ids import IdGenerator, SystemClock

    lines = [
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: chain}\nspec:\n"
        "  actions:\n    step: {kind: builtin.assign}\n  tasks:\n"
    ]
    for i in range(steps):
        needs = f", needs: [s{i - 1}]" if i else ""
        lines.append(f"    - {{id: s{i}, uses: 'action:step', with: {{i: {i}}}{needs}}}\n")
    workflow = path.parent / "chain.yaml"
    workflow.write_text("".join(lines))
    clock = SystemClock()
    with open_store(str(path)) as store:
        run_id = create_run(store, prepare_run(str(workflow)), clock=clock, ids=IdGenerator(clock))
        asyncio.run(RunExecutor(store, run_id, clock=clock).execute())
    return run_id


def test_upgrade_from_0008_splits_stored_plans_into_rows(tmp_path: Path) -> None:
    """A run written before 0009 (whole plan and document in the run row) reads the same
    after the upgrade, and a downgrade puts the whole plan back."""
    import asyncio
    import json

    from agentctl.compiler.plan import Plan
    from agentctl.engine.core.records import load_run
    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.executor import RunExecutor
    from agentctl.engine.run.frontier import take_handed
    from agentctl.ids import IdGenerator, SystemClock

    path = tmp_path / "old.db"
    run_id = _roll_chain(path, 3)
    clock = SystemClock()
    with open_store(str(path)) as store:
        # A second run, created and not started: it must run after the upgrade.
        pending = create_run(
            store, prepare_run(str(tmp_path / "chain.yaml")), clock=clock, ids=IdGenerator(clock)
        )
        # Drop the plan kept for its first execution in this process: it must be read
        # from the converted rows.
        assert take_handed(store.path, pending) is not None
        with store.read() as conn:
            expected = load_run(conn, run_id, whole=True)
        with store.write() as conn:
            migrate.downgrade(conn, "0008_session_names")
        with store.read() as conn:
            old_plan, old_doc = conn.exec_driver_sql(
                "SELECT plan_json, workflow_json FROM runs WHERE id = ?", (run_id,)
            ).one()
    # At 0008 the run row holds the whole plan and document, as that release wrote them.
    assert json.loads(old_plan) == expected.plan
    assert json.loads(old_doc) == expected.workflow
    assert Plan.from_json(json.loads(old_plan)).order == ("s0", "s1", "s2")
    with open_store(str(path)) as store:  # upgrades on open
        assert store.revision() == migrate.head_revision()
        with store.read() as conn:
            header, document = conn.exec_driver_sql(
                "SELECT plan_json, workflow_json FROM runs WHERE id = ?", (run_id,)
            ).one()
            rows = conn.exec_driver_sql(
                "SELECT task_id, ordinal FROM plan_tasks WHERE run_id = ? ORDER BY ordinal",
                (run_id,),
            ).all()
            again = load_run(conn, run_id, whole=True)
            lean = load_run(conn, run_id)
    assert "tasks" not in json.loads(header) and json.loads(header)["taskCount"] == 3
    assert "tasks" not in json.loads(document)["spec"]
    assert [tuple(r) for r in rows] == [("s0", 0), ("s1", 1), ("s2", 2)]
    assert again.plan == expected.plan and again.workflow == expected.workflow
    assert lean.plan == json.loads(header) and lean.workflow == json.loads(document)
    # Re-submitting the upgraded run answers from its row; its state reads the same.
    from agentctl.engine.run.outcome import finished_outcome

    with open_store(str(path)) as store:
        outcome = finished_outcome(store, run_id)
        assert outcome is not None and outcome.state == "succeeded"
        assert outcome.output == expected.output
        # The run created before the downgrade runs from its converted rows.
        ran = asyncio.run(RunExecutor(store, pending, clock=clock).execute())
    assert ran.state == "succeeded" and ran.output == expected.output


def test_newer_format_check_probes_partial_indexes(tmp_path: Path) -> None:
    """Resume's check for records in a newer format reads an index of such rows only, so
    it does not grow with the run; the indexes' condition names the current version."""
    from agentctl.store.records import RUN_RECORDS
    from agentctl.store.tables import FORMAT_VERSION, NEWER_FORMAT_CONDITION, NEWER_FORMAT_TABLES

    assert NEWER_FORMAT_CONDITION == f"format_version > {FORMAT_VERSION}"
    assert {t.name for t in NEWER_FORMAT_TABLES} == {table for _, table, _ in RUN_RECORDS}
    from agentctl.store.records import newer_format_probe

    with open_store(str(tmp_path / "a.db")) as store, store.read() as conn:
        probe = newer_format_probe.compiled("sqlite")
        plan = conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {probe.text}", probe.parameters({"run_id": "run-1"})
        ).all()
        details = " | ".join(str(row[-1]) for row in plan)
        for _, table, _ in RUN_RECORDS:
            assert f"ix_{table}_newer_format" in details, details
        assert "SCAN" not in details.replace("SCAN probe_", ""), details


def test_a_killed_writers_wal_is_indexed_once_on_open(tmp_path: Path) -> None:
    """A database a killed process left with its -wal and -shm: the store's first connection
    opens while the revision check's read-only one still holds the WAL index, so SQLite does
    not read every WAL frame a second time; the pool keeps that connection for the caller."""
    db = tmp_path / "runtime.db"
    open_store(str(db)).close()
    keeper = sqlite3.connect(db, isolation_level=None)  # holds the WAL open, like a live writer
    keeper.execute("PRAGMA journal_mode=WAL")
    keeper.execute("CREATE TABLE scratch (n INTEGER)")
    keeper.execute("INSERT INTO scratch VALUES (42)")
    assert (tmp_path / "runtime.db-wal").exists()
    connects: list[str] = []
    real_connect = sqlite3.connect

    def recording_connect(target: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        connects.append(str(target))
        return real_connect(target, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", recording_connect)
        patch.setattr(sqlite3.dbapi2, "connect", recording_connect)
        store = open_store(str(db))
    try:
        assert len(connects) == 2 and "mode=ro" in connects[0]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sqlite3, "connect", recording_connect)
            with store.read() as conn:
                assert conn.exec_driver_sql("SELECT n FROM scratch").scalar() == 42
        assert len(connects) == 2  # the store's first transaction used that connection
    finally:
        store.close()
        keeper.close()


def test_a_store_closed_before_any_transaction_closes_its_first_connection(
    tmp_path: Path,
) -> None:
    """The connection opened beside the revision check is the store's even before the pool
    hands it out: closing the store closes it (the last connection's close checkpoints the
    WAL and removes it)."""
    db = tmp_path / "runtime.db"
    with open_store(str(db)) as store, store.write() as conn:
        _insert_run(conn)
    assert not (tmp_path / "runtime.db-wal").exists()
    opened = open_store(str(db))
    assert (tmp_path / "runtime.db-wal").exists()
    opened.close()
    assert not (tmp_path / "runtime.db-wal").exists()


def test_a_driver_read_is_one_snapshot_and_its_errors_are_the_stores(tmp_path: Path) -> None:
    """``DriverSession.read()`` (a finished run's outcome is read through it): a write
    committed by another connection meanwhile is not seen inside it, and a driver error
    is the store's PersistenceError."""
    db = tmp_path / "a.db"
    with open_store(str(db)) as store:
        with store.write() as conn:
            _insert_run(conn)
        other = sqlite3.connect(db, isolation_level=None)
        try:
            with store.driver_session() as session, session.read() as conn:
                before = conn.exec_driver_sql("SELECT status FROM runs").first()[0]
                other.execute("UPDATE runs SET status = 'failed'")
                assert conn.exec_driver_sql("SELECT status FROM runs").first()[0] == before
        finally:
            other.close()
        with (
            pytest.raises(PersistenceError),
            store.driver_session() as session,
            session.read() as conn,
        ):
            conn.exec_driver_sql("SELECT nothing FROM no_such_table")


def test_driver_sessions_in_threads_each_have_their_own_connection(tmp_path: Path) -> None:
    """Before any engine exists the store hands out the driver's connections itself
    (store/sqlite_connections.py): sessions open at once in several threads (the dashboard
    serves requests from a thread pool) never share one, an idle one is reused, and a
    session still open when the store closes has its connection closed when it ends."""
    import threading

    db = tmp_path / "a.db"
    open_store(str(db)).close()
    store = open_store(str(db))
    with store.driver_session() as first:
        reused = first._raw  # noqa: SLF001 - which connection the session got
    with store.driver_session() as again:
        assert again._raw is reused  # noqa: SLF001
    held: list[sqlite3.Connection] = []
    all_open = threading.Barrier(4)
    release = threading.Event()

    def session() -> None:
        with store.driver_session() as s, s.read() as conn:
            held.append(s._raw)  # noqa: SLF001
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM runs").first()[0] == 0
            all_open.wait(timeout=30)
            assert release.wait(timeout=30)

    threads = [threading.Thread(target=session) for _ in range(3)]
    for thread in threads:
        thread.start()
    all_open.wait(timeout=30)
    assert len({id(conn) for conn in held}) == 3
    store.close()  # while the three sessions are still open
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    for conn in held:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
