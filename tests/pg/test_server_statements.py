"""A PostgreSQL driver session sends the store's statements through ``ServerStatements``
(store/pg_statements.py): each text converted once per connection and prepared on the
server as psycopg's cursor would (by the connection's own manager), its rows and counts
the same as the cursor gives, its failures the same psycopg errors, classified by
SQLSTATE."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg._preparing import PrepareManager
from sqlalchemy import insert

from agentctl.errors import PersistenceError
from agentctl.store import runs_repo
from agentctl.store.engine import open_store
from agentctl.store.tables import runs

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _text(statement: Any) -> str:
    """A repository statement's text on PostgreSQL, as its repository sends it."""
    return str(statement.compiled("postgresql").text)


def _insert_run(conn: Any, run_id: str) -> None:
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


def _prepared(conn: Any) -> list[str]:
    """The statement texts prepared on the session's own server connection."""
    rows = conn.exec_driver_sql("SELECT statement FROM pg_prepared_statements", ())
    return [row[0] for row in rows]


#: How many executions of a text on one connection psycopg waits for before preparing it.
_THRESHOLD = PrepareManager.prepare_threshold or 0


def test_store_statements_are_prepared_once_and_answer_as_the_cursor_does(
    postgres_url: str,
) -> None:
    """Every column type of a run's row comes back as psycopg's cursor returns it, before
    and after the text is prepared (once, however often it runs); an integer parameter
    whose PostgreSQL type changes with its size (LIMIT 2, then 100000, then 2**40) gets a
    statement per type, as psycopg keys its prepared statements, and each answers."""
    store = open_store(postgres_url)
    try:
        with store.write() as conn:
            for run_id in ("run-a", "run-b", "run-c"):
                _insert_run(conn, run_id)
        run = _text(runs_repo._RUN)
        listed = _text(runs_repo._list_runs(False, False, False, False))
        with psycopg.connect(postgres_url) as plain:
            expected = plain.execute(run, ("run-b",)).fetchall()
        assert len(expected) == 1
        with store.driver_session() as session:
            for _ in range(_THRESHOLD + 3):
                got = session.exec_driver_sql(run, ("run-b",))
                assert list(got) == expected and got.rowcount == 1
            assert _prepared(session).count(run.replace("%s", "$1")) == 1
            for limit in (2, 100_000, 2**40):
                for _ in range(_THRESHOLD + 1):
                    found = session.exec_driver_sql(listed, (limit,))
                    assert len(list(found)) == min(limit, 3)
            assert _prepared(session).count(listed.replace("%s", "$1")) == 3
            missing = session.exec_driver_sql(run, ("none",))
            assert missing.first() is None and missing.rowcount == 0
    finally:
        store.close()


def test_a_failed_store_statement_is_classified_by_its_sqlstate_and_rolled_back(
    postgres_url: str,
) -> None:
    """A unique violation inside a driver session's write is store.constraint (SQLSTATE
    23505), its transaction rolled back; the session's connection goes on. The statement
    was prepared before it failed; psycopg drops every prepared statement after a ROLLBACK
    (DEALLOCATE ALL) and the manager it shares knows: the text is sent again, unprepared,
    then prepared anew."""
    store = open_store(postgres_url)
    compiled = runs_repo._insert_run.compiled("postgresql")
    text = compiled.text
    row = dict.fromkeys(compiled.names, None)
    row.update(id="run-x", format_version=1, workflow_name="wf", status="running")
    row.update(workflow_digest="sha256:a", plan_digest="sha256:b", mode="execute")
    row.update(plan_json="{}", workflow_json="{}", inputs_json="{}", created_at=NOW)
    values = compiled.parameters(row)
    try:
        with store.driver_session() as session:
            with session.write() as conn:
                for number in range(_THRESHOLD + 1):
                    row_values = (f"run-{number}", *values[1:])
                    assert conn.exec_driver_sql(text, row_values).rowcount == 1
            assert any("INSERT INTO runs" in found for found in _prepared(session))
            with pytest.raises(PersistenceError) as raised, session.write() as conn:
                conn.exec_driver_sql(text, ("run-y", *values[1:]))
                conn.exec_driver_sql(text, ("run-0", *values[1:]))
            assert raised.value.code == "store.constraint"
            assert "23505" in str(raised.value)
            assert _prepared(session) == []
            for number in range(_THRESHOLD + 2):
                with session.write() as conn:
                    row_values = (f"run-z{number}", *values[1:])
                    assert conn.exec_driver_sql(text, row_values).rowcount == 1
            assert any("INSERT INTO runs" in found for found in _prepared(session))
            ids = session.exec_driver_sql("SELECT count(*) FROM runs", ())
            assert ids.first()[0] == 2 * _THRESHOLD + 3
    finally:
        store.close()
