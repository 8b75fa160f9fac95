"""What a claimed task's updates cost the server's indexes (migration 0017).

An update of a row whose indexed columns did not change is a HOT update: the new version
goes on the same page and no index gets a new entry. A claimed task's effect is updated
twice and its budget reservation once, and each update used to change an indexed
``status``, so each wrote into every index of its table. And a claim of one ready row
read and sorted every ready row of the batch. These tests pin the server's own view of
both: its table statistics and its generic plan."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import migrate
from agentctl.store import task_claims_repo as repo
from agentctl.store.engine import open_store
from agentctl.store.transitions import guarded_update
from tests.pg.backends import rows
from tests.pg.cluster import Cluster
from tests.pg.test_claim_slots import _running_run
from tests.pg.test_ledger_postings import speaking
from tests.pg.test_postgres_store import empty_url  # noqa: F401 - a fixture

_INDEXES = (
    "SELECT indexname FROM pg_indexes WHERE tablename IN ('effects', 'tasks', "
    "'budget_reservations', 'task_claims') ORDER BY indexname"
)
_FILL = (
    "SELECT relname, reloptions FROM pg_class WHERE relname IN ('effects', "
    "'budget_reservations') ORDER BY relname"
)


def _updates(url: str, at_least: dict[str, int]) -> dict[str, tuple[int, int]]:
    """(updates, HOT updates) per table, once the server counted ``at_least`` updates of
    each (a backend reports its counts when it ends, or within a second or so)."""
    tables = tuple(at_least)
    query = (
        "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = ANY(?)"
    )
    deadline = time.monotonic() + 15
    while True:
        found = {str(r[0]): (int(r[1]), int(r[2])) for r in rows(url, query, (list(tables),))}
        if all(found.get(t, (0, 0))[0] >= at_least[t] for t in tables):
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"the server counted {found}, fewer than {at_least} updates each")
        time.sleep(0.2)


@pytest.fixture
def fresh_url(
    postgres_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A new database at the current schema, never used before: its table statistics
    count this test's writes alone (the ``postgres_url`` databases are reused)."""
    monkeypatch.setenv("AGENTCTL_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    url = postgres_cluster.create_database(template=postgres_cluster.template)
    try:
        yield url
    finally:
        postgres_cluster.drop_database(url)


def _limited_run(url: str, tmp_path: Path, items: int) -> tuple[Any, str]:
    """A store and a running run of ``items`` process steps whose output has a limit."""
    (tmp_path / "wf.yaml").write_text(
        speaking(tmp_path / "ledger.txt", items, budgets="{maxProcessOutputBytes: 1000000000000}")
    )
    prepared = prepare_run(str(tmp_path / "wf.yaml"), workspace=str(tmp_path))
    store = open_store(url)
    clock = SystemClock()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    with store.write() as conn:
        guarded_update(conn, "run", (run_id,), {"status": "running"})
    return store, run_id


def test_a_claimed_tasks_effect_and_reservation_updates_are_hot(
    fresh_url: str, tmp_path: Path
) -> None:
    """Executing claimed tasks of one process step each: their effects' one update (the
    outcome: an effect that needs no approval is journaled ``started``; it was two, the
    move to ``started`` too) and their reservations' settling are all HOT updates: no
    index holds a column they change, and the tables leave each page room for the new
    version. They were none (``status`` was indexed on both tables)."""
    from agentctl.engine.run.claimed_tasks import RunSnapshots, execute_claimed
    from agentctl.engine.run.outcome import ExecutionOptions

    # A limit on the output, so each effect reserves and settles (a claimed task reserves
    # nothing of a resource without a limit: docs/budgets.md, "Workers").
    store, run_id = _limited_run(fresh_url, tmp_path, 6)
    clock = SystemClock()
    planned = (
        "SELECT task_id FROM plan_tasks WHERE run_id = ? AND task_id LIKE 'unit%' "
        "AND task_id <> 'unit' ORDER BY ordinal"
    )
    tasks = [str(r[0]) for r in rows(fresh_url, planned, (run_id,))]
    assert len(tasks) == 6
    try:
        with store.write() as conn:
            published = [repo.Published(t, "b", '{"vars": {}}') for t in tasks]
            repo.publish(conn, run_id, published, clock.now())
            claimed = repo.claim_ready(conn, "w1", clock.now(), len(tasks), lease_seconds=60)
        snapshots = RunSnapshots(store)
        options = ExecutionOptions(cancel_poll_seconds=3600, workspace=str(tmp_path))
        for claim in claimed:
            how = asyncio.run(
                execute_claimed(store, claim, snapshots, clock=clock, options=options)
            )
            assert how == "done"
    finally:
        store.close()  # its backends end, and report their counts
    counted = _updates(fresh_url, {"effects": len(tasks), "budget_reservations": len(tasks)})
    assert counted["effects"] == (len(tasks), len(tasks)), counted
    assert counted["budget_reservations"] == (len(tasks), len(tasks)), counted
    statuses = rows(fresh_url, "SELECT DISTINCT status FROM effects WHERE run_id = ?", (run_id,))
    assert statuses == [("succeeded",)]


def test_0017_goes_down_and_up_again_with_rows(empty_url: str) -> None:  # noqa: F811
    """Downgrading past 0017 restores the status indexes and the default fill factor with
    the rows kept; upgrading again drops them and sets the fill factor."""
    with open_store(empty_url) as store:
        with store.write() as conn:
            conn.exec_driver_sql(
                "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json,"
                " status, created_at, updated_at) VALUES ('r', 'wf', 'a', 'b', '{}',"
                " 'running', '2026-01-01', '2026-01-01')"
            )
            conn.exec_driver_sql(
                "INSERT INTO task_claims (run_id, task_id, state, basis, payload_json,"
                " ready_at) VALUES ('r', 't', 'ready', 'b', '{}', '2026-01-01')"
            )
    upgraded = rows(empty_url, _INDEXES)
    assert ("ix_task_claims_ready",) in upgraded and ("ix_effects_run_id_status",) not in upgraded
    assert rows(empty_url, _FILL) == [
        ("budget_reservations", ["fillfactor=80"]),
        ("effects", ["fillfactor=80"]),
    ]
    with open_store(empty_url) as store, store.write() as conn:
        below = migrate._script().get_revision("0017_hot_updates").down_revision
        migrate.downgrade(conn, str(below))
    downgraded = {str(r[0]) for r in rows(empty_url, _INDEXES)}
    assert {
        "ix_effects_run_id_status",
        "ix_budget_reservations_run_id_status",
        "ix_task_claims_state_ready_at",
    } <= downgraded
    assert not downgraded & {"ix_task_claims_ready", "ix_task_claims_leases"}
    assert [r[1] for r in rows(empty_url, _FILL)] == [None, None]
    assert rows(empty_url, "SELECT task_id, state FROM task_claims") == [("t", "ready")]
    with open_store(empty_url) as store:
        assert store.revision() == migrate.head_revision()
    assert rows(empty_url, _INDEXES) == upgraded
    assert [r[1] for r in rows(empty_url, _FILL)] == [["fillfactor=80"]] * 2
    assert rows(empty_url, "SELECT task_id, state FROM task_claims") == [("t", "ready")]


def test_a_claim_of_one_ready_row_among_many_reads_only_that_row(
    postgres_url: str, tmp_path: Path
) -> None:
    """A worker's claim walks the ready rows in its own order (oldest first) and stops at
    its limit, even in the generic plan of its prepared statement: the partial index of
    ready rows matches the statement's literal ``state = 'ready'``. It used to read every
    ready row of the batch through ``(state, ready_at)`` and sort them all."""
    import psycopg

    store, run_id, tasks = _running_run(postgres_url, tmp_path, 48)
    clock = SystemClock()
    try:
        with store.write() as conn:
            published = [repo.Published(t, "b", "{}") for t in tasks]
            repo.publish(conn, run_id, published, clock.now())
    finally:
        store.close()
    compiled = repo._claim_now(None).compiled("postgresql")
    values = compiled.parameters(
        {"limit": 1, "worker": "w1", "expires": clock.now(), "stamp": clock.now()}
    )
    numbered = compiled.text
    for n in range(1, len(values) + 1):
        numbered = numbered.replace("%s", f"${n}", 1)
    with psycopg.connect(postgres_url) as conn:  # a transaction: rolled back at the end
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE claim AS {numbered}")
        listed = ", ".join(psycopg.sql.quote(v) for v in values)
        found = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE claim({listed})")
        plan = "\n".join(str(r[0]) for r in found)
        conn.rollback()
    scan = next(line for line in plan.splitlines() if "on task_claims c" in line)
    assert "ix_task_claims_ready" in scan and "rows=1 " in scan, plan
    assert "Sort" not in plan, plan
