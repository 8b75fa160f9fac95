"""The floor of a W1 transition's own statements: agentctl's W1 beside a replay of exactly
the statements its transitions issued, with their recorded parameters, and nothing else.

A W1 run (a chain of ``--steps`` steps, ``synchronous=FULL``) is created, and a copy of the
database is taken just before it executes. The run then executes with every statement of
its hot path (the driver session: ``BEGIN IMMEDIATE``, the fencing ``SELECT``, the guarded
``UPDATE``, the checkpoint and audit rows, ``COMMIT``) recorded with its parameters. The
recorded statements are replayed on the copy by the bare ``sqlite3`` driver with the same
pragmas: no template, digest, JSON encoding or contract check, values precomputed. The
replay's time per step is what agentctl's statements cost on this disk; W1's ratio to it
is the price of the Python around them. Prints one JSON line.

Run it under the shared benchmark lock: ``flock /tmp/agentctl-bench.lock python
bench/transition_floor.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from engine_bench import _workspace, chain_workflow

from agentctl.engine.core.faults import Faults
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import engine as store_engine
from agentctl.store.engine import open_store


class _RecordingCursor:
    def __init__(self, cursor: Any, log: list[tuple[str, Any]]) -> None:
        self._cursor = cursor
        self._log = log

    def execute(self, statement: str, parameters: Any = ()) -> Any:
        self._log.append((statement, tuple(parameters) if parameters else ()))
        return self._cursor.execute(statement, parameters)

    def executemany(self, statement: str, rows: Any) -> Any:
        rows = list(rows)
        self._log.extend((statement, tuple(row)) for row in rows)
        return self._cursor.executemany(statement, rows)


class _RecordingConnection(_RecordingCursor):
    """A pooled connection whose driver connection records every statement a driver
    session runs on it: on the connection (``BEGIN``, ``COMMIT``) or on a cursor it makes
    (the rest; ``executemany`` recorded one row at a time)."""

    def __init__(self, raw: Any, log: list[tuple[str, Any]]) -> None:
        super().__init__(getattr(raw, "dbapi_connection", raw), log)
        self._raw = raw

    @property
    def dbapi_connection(self) -> _RecordingConnection:
        return self

    def cursor(self, *factory: Any) -> _RecordingCursor:
        return _RecordingCursor(self._cursor.cursor(*factory), self._log)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def _copy(db: Path, to: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{db}{suffix}")
        if source.exists():
            shutil.copy(source, f"{to}{suffix}")


def agentctl_run(steps: int) -> tuple[float, float, list[tuple[str, Any]], Path]:
    wf, db = _workspace(chain_workflow(steps))
    prepared = prepare_run(str(wf))
    store = open_store(str(db))
    clock = SystemClock()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    store.close()  # the last connection's close checkpoints the WAL into the file
    before = db.with_name("before.db")
    _copy(db, before)
    log: list[tuple[str, Any]] = []
    original = store_engine.DriverSession.__init__

    def recording_init(self: Any, raw: Any, *args: Any, **kwargs: Any) -> None:
        original(self, _RecordingConnection(raw, log), *args, **kwargs)

    store_engine.DriverSession.__init__ = recording_init  # type: ignore[method-assign]
    try:
        store = open_store(str(db))
        options = ExecutionOptions(faults=Faults(""), cancel_poll_seconds=3600)
        started, cpu = time.perf_counter(), time.process_time()
        outcome = asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert outcome.state == "succeeded", outcome.error
        store.close()
    finally:
        store_engine.DriverSession.__init__ = original  # type: ignore[method-assign]
    return wall, cpu, log, before


def replay(log: list[tuple[str, Any]], db: Path) -> tuple[float, float, int]:
    work = db.with_name("replay.db")
    _copy(db, work)
    conn = sqlite3.connect(work, isolation_level=None, check_same_thread=False)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
        conn.execute(f"PRAGMA {pragma}")
    cursor = conn.cursor()
    commits = sum(1 for statement, _ in log if statement == "COMMIT")
    started, cpu = time.perf_counter(), time.process_time()
    for statement, parameters in log:
        cursor.execute(statement, parameters)
        if statement.startswith("SELECT"):
            cursor.fetchall()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    return wall, cpu, commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    agentctl_run(5)  # imports and lazily built state out of the clock
    ours, floor, statements = [], [], 0
    for _ in range(args.repeats):
        wall, _cpu, log, before = agentctl_run(args.steps)
        replay_wall, _, commits = replay(log, before)
        ours.append(wall)
        floor.append(replay_wall)
        statements = len(log)
    ours_median, floor_median = statistics.median(ours), statistics.median(floor)
    print(
        json.dumps(
            {
                "bench": "agentctl",
                "workload": "W1_statement_floor",
                "steps": args.steps,
                "wall_s": ours_median,
                "floor_wall_s": floor_median,
                "us_per_step": round(1e6 * ours_median / args.steps, 1),
                "floor_us_per_step": round(1e6 * floor_median / args.steps, 1),
                "ratio_to_floor": round(ours_median / floor_median, 2),
                "statements_per_step": round(statements / args.steps, 2),
                "commits": commits,
                "runs": [round(w, 4) for w in ours],
                "floor_runs": [round(w, 4) for w in floor],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
