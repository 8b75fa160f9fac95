"""``gc``: expired memory entries and old terminal runs (with their rows) go; nothing else."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import event, func, insert, select

from agentctl.engine.core.records import TERMINAL_RUN_STATES
from agentctl.errors import UsageError
from agentctl.ids import FixedClock
from agentctl.memory import LongTermMemory, collect_garbage
from agentctl.memory.housekeeping import TERMINAL_RUN_STATUSES
from agentctl.store.engine import Store
from agentctl.store.journal_tables import effects
from agentctl.store.memory_tables import memory_entries
from agentctl.store.run_tables import runs, tasks


def _run(store: Store, run_id: str, status: str, updated_at: datetime, **extra: object) -> None:
    with store.write() as conn:
        conn.execute(
            insert(runs).values(
                id=run_id,
                workflow_name="wf",
                workflow_digest="sha256:a",
                plan_digest="sha256:b",
                plan_json="{}",
                status=status,
                created_at=updated_at,
                updated_at=updated_at,
                **extra,
            )
        )
        conn.execute(insert(tasks).values(run_id=run_id, task_id="t", ordinal=0, status=status))
        conn.execute(
            insert(effects).values(
                id=f"effect-{run_id}",
                run_id=run_id,
                task_id="t",
                attempt=1,
                ordinal=1,
                operation="builtin.read",
                input_digest="d",
                effect_class="observe",
                idempotency="idempotent",
                risk="low",
                status="succeeded",
                requested_at=updated_at,
            )
        )


def _count(store: Store, table: object) -> int:
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def test_terminal_states_match_the_engine() -> None:
    assert frozenset(TERMINAL_RUN_STATUSES) == TERMINAL_RUN_STATES


def test_gc_dry_run_then_collect(store: Store, clock: FixedClock, memory: LongTermMemory) -> None:
    now = clock.now()
    _run(store, "run-old-ok", "succeeded", now - timedelta(days=40))
    _run(store, "run-old-failed", "failed", now - timedelta(days=31))
    _run(store, "run-old-running", "running", now - timedelta(days=90))
    _run(store, "run-recent", "cancelled", now - timedelta(days=27))
    _run(
        store,
        "retry-child",
        "succeeded",
        now - timedelta(days=1),
        source_run_id="run-old-ok",
        relation="retry",
    )
    memory.put("n", "gone", {"content": {"type": "text", "text": "x"}}, retention_days=1)
    memory.put("n", "kept", {"content": {"type": "text", "text": "x"}})
    clock.advance(2 * 86_400)
    now = clock.now()

    report = collect_garbage(store, now, older_than_days=30, dry_run=True)
    assert report.to_json() == {
        "dryRun": True,
        "now": "2026-03-03T12:00:00Z",
        "runsUpdatedBefore": "2026-02-01T12:00:00Z",
        "expiredMemoryEntries": 1,
        "terminalRuns": 2,
        "runIds": ["run-old-failed", "run-old-ok"],
    }
    assert _count(store, runs) == 5 and _count(store, memory_entries) == 2

    done = collect_garbage(store, now, older_than_days=30)
    assert done.dry_run is False and done.runs == 2 and done.memory_entries == 1
    with store.read() as conn:
        left = [row[0] for row in conn.execute(select(runs.c.id).order_by(runs.c.id))]
        child_source = conn.execute(
            select(runs.c.source_run_id).where(runs.c.id == "retry-child")
        ).scalar_one()
        keys = [row[0] for row in conn.execute(select(memory_entries.c.key))]
    assert left == ["retry-child", "run-old-running", "run-recent"]
    assert child_source is None  # the derived run stays, its link is cleared
    assert _count(store, tasks) == 3 and _count(store, effects) == 3  # cascaded
    assert keys == ["kept"]
    assert collect_garbage(store, now).runs == 0


def test_gc_rejects_negative_days(store: Store, clock: FixedClock) -> None:
    with pytest.raises(UsageError, match="0 or more"):
        collect_garbage(store, clock.now(), older_than_days=-1)


def _old_runs(store: Store, count: int, updated_at: datetime) -> list[str]:
    """``count`` succeeded runs, each with a task row, inserted in one go."""
    stamp = updated_at.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
    ids = [f"run-{i:05d}" for i in range(count)]
    with store.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json, "
            "status, created_at, updated_at) VALUES (?, 'wf', 'a', 'b', '{}', 'succeeded', ?, ?)",
            [(run_id, stamp, stamp) for run_id in ids],
        )
        conn.exec_driver_sql(
            "INSERT INTO tasks (run_id, task_id, ordinal, status) VALUES (?, 't', 0, 'succeeded')",
            [(run_id,) for run_id in ids],
        )
    return ids


class _WriteLog:
    """Which transaction each ``DELETE`` ran in and how many rows it removed, observed
    through SQLAlchemy's engine events (a commit ends one transaction)."""

    def __init__(self, store: Store) -> None:
        self.commits = 0
        self.deletes: dict[str, list[tuple[int, int]]] = {"runs": [], "memory_entries": []}
        event.listen(store.engine, "commit", self._on_commit)
        event.listen(store.engine, "after_cursor_execute", self._on_execute)

    def _on_commit(self, _conn: object) -> None:
        self.commits += 1

    def _on_execute(self, _conn: object, cursor: object, statement: str, *_: object) -> None:
        for table, seen in self.deletes.items():
            if statement.startswith(f"DELETE FROM {table} "):
                seen.append((self.commits, int(cursor.rowcount)))  # type: ignore[attr-defined]

    def transactions(self, table: str) -> int:
        return len({transaction for transaction, _ in self.deletes[table]})

    def largest_delete(self, table: str) -> int:
        return max(rows for _, rows in self.deletes[table])


def test_gc_deletes_thousands_of_runs_in_transactions_of_at_most_500(
    store: Store, clock: FixedClock
) -> None:
    now = clock.now()
    doomed = _old_runs(store, 1_234, now - timedelta(days=40))
    _run(store, "run-recent", "succeeded", now - timedelta(days=1))
    _run(store, "run-old-running", "running", now - timedelta(days=90))
    log = _WriteLog(store)

    report = collect_garbage(store, now, older_than_days=30)

    assert report.runs == 1_234 and list(report.run_ids) == doomed
    assert log.largest_delete("runs") <= 500
    assert log.transactions("runs") >= 3  # 1,234 runs cannot fit in fewer batches of 500
    with store.read() as conn:
        left = [row[0] for row in conn.execute(select(runs.c.id).order_by(runs.c.id))]
    assert left == ["run-old-running", "run-recent"]
    assert _count(store, tasks) == 2  # the collected runs' tasks went with them


def test_gc_batch_size_bounds_every_transaction(
    store: Store, clock: FixedClock, memory: LongTermMemory
) -> None:
    now = clock.now()
    doomed = _old_runs(store, 1_000, now - timedelta(days=40))
    memory.put_many(
        "n",
        [(f"k{i}", {"content": {"type": "text", "text": f"entry {i}"}}) for i in range(250)],
        retention_days=1,
    )
    memory.put("n", "kept", {"content": {"type": "text", "text": "kept"}})
    clock.advance(2 * 86_400)
    log = _WriteLog(store)

    report = collect_garbage(store, clock.now(), older_than_days=30, batch_size=100)

    assert (report.runs, report.memory_entries) == (1_000, 250)
    assert list(report.run_ids) == doomed
    assert log.largest_delete("runs") <= 100 and log.transactions("runs") >= 10
    assert log.largest_delete("memory_entries") <= 100
    assert log.transactions("memory_entries") >= 3
    assert _count(store, runs) == 0 and _count(store, memory_entries) == 1
    assert memory.search("n", "entry").hits == ()  # the text index lost them too
