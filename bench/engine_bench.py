"""Executor benchmarks W1 (500 sequential steps), W2 (200-way fan-out and join), W3
(re-submit and read a finished run) and W3b (resume after SIGKILL at step 501; with
``--w3b-scale`` also at step 5,001, to compare the two).

Prints one JSON line per measurement in the peers' format, so
``EXTRA_BENCH="python bench/engine_bench.py" bash "$PEERS_HARNESS/run_all.sh"`` (the peers'
harness, kept outside this repository) puts
agentctl beside DBOS and LangGraph measured in the same run. ``synchronous=FULL`` (the
default) throughout; every store is a fresh SQLite file in a new temp directory.

The clock covers creating the run and executing it (what "starting the workflow" means
here); loading and compiling the YAML is reported separately as ``compile_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from agentctl.engine.core.faults import Faults
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor, finished_outcome
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store import encryption_repo
from agentctl.store.engine import Store, open_store
from agentctl.store.health import wal_frames

HEADER = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: {name}}}
spec:
  runtime: {{maxConcurrency: {concurrency}}}
  policy: {{approval: never}}
  actions:
    step: {{kind: builtin.assign}}
  tasks:
"""


def chain_workflow(n: int) -> str:
    lines = [HEADER.format(name="w1-sequential", concurrency=1)]
    for i in range(n):
        needs = f", needs: [s{i - 1}]" if i else ""
        body = f"with: {{i: {i}, ok: true}}{needs}"
        lines.append(f"    - {{id: s{i}, uses: 'action:step', {body}}}\n")
    return "".join(lines)


def fanout_workflow(n: int) -> str:
    return (
        HEADER.format(name="w2-fanout", concurrency=64)
        + f"""    - id: unit
      uses: action:step
      foreach: {{items: {list(range(n))}, maxItems: {n}}}
      with: {{i: "${{{{ vars.item }}}}", ok: true}}
    - id: join
      uses: action:step
      needs: [unit]
      with: {{items: "${{{{ tasks.unit.output.items }}}}"}}
"""
    )


class CommitCounter:
    """Counts COMMIT statements on every connection of the store (driver-level ones too).
    With ``trace`` off it counts nothing (``count`` is None) but sets the store up the
    same way: the trace callback is handed every statement with its parameters written in
    (bytes as hex, by SQLite, a byte at a time), which costs the workload CPU of its own
    in proportion to the bytes written (about a tenth of W1's CPU). So no timed run is
    counted: a separate, untimed run of the same workflow is (:func:`commits_of`)."""

    def __init__(self, store: Store, *, trace: bool = True) -> None:
        self.count: int | None = 0 if trace else None
        store.engine.dispose()
        if trace:
            event.listen(store.engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.set_trace_callback(self._trace)

    def _trace(self, statement: str) -> None:
        # The statement arrives with its parameters written in (a 100 KB value is 100 KB
        # of SQL, twice that as hex for bytes): look at its start only, or the counter's
        # own upper-casing is what the workload measures.
        if statement[:16].lstrip().upper().startswith("COMMIT"):
            assert self.count is not None
            self.count += 1


def _workspace(text: str) -> tuple[Path, Path]:
    root = Path(tempfile.mkdtemp(prefix="agentctl-bench-", dir=os.environ.get("BENCH_TMP")))
    (root / "wf.yaml").write_text(text)
    return root / "wf.yaml", root / "runtime.db"


def _execute(store: Store, run_id: str, faults: Faults | None = None) -> Any:
    clock = SystemClock()
    options = ExecutionOptions(faults=faults or Faults(""), cancel_poll_seconds=3600)
    return asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())


#: Set by ``--encryption-ab``: whether the stores of the next rolls seal their payloads.
ENCRYPTED = False
#: Cleared by ``--encryption-ab``: whether W1 and W2 report their commits (an extra,
#: untimed run each, see :func:`commits_of`).
COUNT_COMMITS = True


def roll(text: str, *, counted: bool = False) -> dict[str, Any]:
    """Create and execute a run of ``text`` on a fresh store, timed; with ``counted``, the
    run's commits are counted too (and the times include the counting)."""
    wf, db = _workspace(text)
    started = time.perf_counter()
    prepared = prepare_run(str(wf))
    compile_s = time.perf_counter() - started
    store = open_store(str(db))
    if ENCRYPTED:  # what `db encryption enable` leaves behind, before the clock starts
        encryption_repo.activate_key(store, "bench", "AGENTCTL_BENCH_KEY", os.urandom(32))
    counter = CommitCounter(store, trace=counted)
    clock = SystemClock()
    started, cpu = time.perf_counter(), time.process_time()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    outcome = _execute(store, run_id)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    assert outcome.state == "succeeded", outcome.error
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "compile_s": compile_s,
        "commits": counter.count,
        "outcome": outcome,
        "store": store,
        "run_id": run_id,
        "db": db,
        "wf": wf,
    }


def commits_of(text: str) -> float | None:
    """The commits a run of ``text`` makes (an untimed run of its own), None when
    ``COUNT_COMMITS`` is off."""
    if not COUNT_COMMITS:
        return None
    result = roll(text, counted=True)
    result["store"].close()
    return float(result["commits"])


def per_step(commits: float | None, n: int) -> float | None:
    return None if commits is None else commits / n


def w1(n: int) -> dict[str, Any]:
    result = roll(chain_workflow(n))
    total = sum(v["output"]["i"] for v in result["outcome"].output.values())
    assert total == sum(range(n))
    result["store"].close()
    return {
        "bench": "agentctl",
        "workload": "W1_sequential",
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "steps_per_s": n / result["wall_s"],
        "commits_per_step": per_step(commits_of(chain_workflow(n)), n),
        "compile_s": result["compile_s"],
    }


def w2(n: int) -> dict[str, Any]:
    result = roll(fanout_workflow(n))
    items = result["outcome"].output["join"]["output"]["items"]
    assert sum(item["output"]["output"]["i"] for item in items) == sum(range(n))
    result["store"].close()
    return {
        "bench": "agentctl",
        "workload": "W2_foreach_join",
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "steps_per_s": n / result["wall_s"],
        "commits_per_step": per_step(commits_of(fanout_workflow(n)), n),
        "compile_s": result["compile_s"],
    }


def declared_chain_workflow(n: int) -> str:
    """The chain returning one small result (the last step's ``i``), like the peers' W3 and
    W3b workflows (DBOS returns a sum, LangGraph its two-key state), not every step's."""
    return chain_workflow(n).replace(
        "  tasks:\n",
        f'  outputs: {{last: "${{{{ tasks.s{n - 1}.output.output.i }}}}"}}\n  tasks:\n',
    )


def w3(n: int) -> list[dict[str, Any]]:
    result = roll(declared_chain_workflow(n))
    store: Store = result["store"]
    assert result["outcome"].output == {"last": n - 1}
    started = time.perf_counter()
    again = finished_outcome(store, result["run_id"])
    rerun = time.perf_counter() - started
    assert again is not None and again.output == result["outcome"].output
    from agentctl.engine.core.records import load_run_state

    # The first read through SQLAlchemy also makes the store's engine and its first pooled
    # connection (a SQLite store makes them only when something asks, see
    # store/sqlite_connections.py): reported as ``first_read_s``. The figure compared with
    # LangGraph's get_state on its open saver is the next read, as in earlier rounds.
    reads = []
    for _ in range(2):
        started = time.perf_counter()
        with store.read() as conn:
            status, output, _ = load_run_state(conn, result["run_id"])
        reads.append(time.perf_counter() - started)
        assert status == "succeeded" and output == result["outcome"].output
    first_read, read = reads
    store.close()
    return [
        {
            "bench": "agentctl",
            "workload": "W3_rerun_completed_id",
            "wall_s": rerun,
            "first_run_s": result["wall_s"],
        },
        {
            "bench": "agentctl",
            "workload": "W3_get_state_completed",
            "wall_s": read,
            "first_read_s": first_read,
        },
    ]


def w3b(n: int, *, declared: bool = False) -> dict[str, Any]:
    """Without ``declared`` the run's result is every step's output (501 read and returned);
    with it, one small result like the peers' (``W3b_crash_recovery_declared_output``).
    ``wal_frames_left`` is what the killed process left in the log (``store.health.
    wal_frames``); opening the database reads them, inside the clock."""
    wf, db = _workspace((declared_chain_workflow if declared else chain_workflow)(n + 1))
    child = subprocess.run(
        [sys.executable, __file__, "--child", str(wf), str(db)],
        env={**os.environ, "AGENTCTL_FAULT": f"task.committed:{n}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr  # SIGKILLed right after task n committed
    run_id = child.stdout.strip().splitlines()[0]
    frames = wal_frames(db)
    started, cpu = time.perf_counter(), time.process_time()
    store = open_store(str(db))
    opened = time.perf_counter() - started
    outcome = _execute(store, run_id)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    assert outcome.state == "succeeded"
    assert outcome.output == {"last": n} if declared else len(outcome.output) == n + 1
    store.close()
    return {
        "bench": "agentctl",
        "workload": "W3b_crash_recovery" + ("_declared_output" if declared else ""),
        "wall_s": wall,
        "cpu_s": cpu,
        "launch_s": opened,
        "replay_only_s": 0.0,
        "resume_at_step": n + 1,
        "wal_frames_left": frames,
    }


def _child(wf: str, db: str) -> None:
    prepared = prepare_run(wf)
    store = open_store(db)
    clock = SystemClock()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    print(run_id, flush=True)
    _execute(store, run_id, Faults())


def encryption_ab(rounds: int, n1: int, n2: int) -> None:
    """One row per workload and round, encryption off then on, in the same process
    (commits not counted: see CommitCounter)."""
    global ENCRYPTED, COUNT_COMMITS
    COUNT_COMMITS = False
    w1(5)
    for _ in range(rounds):
        for encrypted in (False, True):
            ENCRYPTED = encrypted
            for row in (w1(n1), w2(n2)):
                print(json.dumps({**row, "encryption": encrypted}), flush=True)
    ENCRYPTED = False


def w3b_scale(rounds: int, n: int, factor: int) -> None:
    """W3b at step ``n + 1`` and at ``factor * n + 1``, both variants, alternated ``rounds``
    times in one process (issue 37's goal: the longer run at most twice the shorter)."""
    w1(5)
    for _ in range(rounds):
        for declared in (False, True):
            for size in (n, factor * n):
                print(json.dumps(w3b(size, declared=declared)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, metavar=("WORKFLOW", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--n1", type=int, default=500)
    parser.add_argument("--n2", type=int, default=200)
    parser.add_argument(
        "--encryption-ab",
        type=int,
        metavar="ROUNDS",
        help="W1 and W2 with encryption off and on, alternated ROUNDS times (docs/encryption.md)",
    )
    parser.add_argument(
        "--w3b-scale",
        type=int,
        metavar="ROUNDS",
        help="W3b only: killed at step n1+1 and at 10*n1+1, alternated ROUNDS times",
    )
    args = parser.parse_args()
    if args.w3b_scale:
        w3b_scale(args.w3b_scale, args.n1, 10)
        return
    if args.child:
        _child(*args.child)
        return
    if args.encryption_ab:
        encryption_ab(args.encryption_ab, args.n1, args.n2)
        return
    # The clock excludes imports and one-time set-up (WORKLOADS.md): a tiny warm-up roll
    # loads the lazily imported modules (templates, the driver) first.
    w1(5)
    rows = [w1(args.n1), w2(args.n2), *w3(args.n1), w3b(args.n1), w3b(args.n1, declared=True)]
    for row in rows:
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
