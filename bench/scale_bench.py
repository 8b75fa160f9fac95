"""How run length affects resume, re-submit, reads and per-step cost (the performance issue).

W3 (re-submit and read a finished run) and W3b (resume after SIGKILL right after the
second-to-last step) at several chain lengths, and a long chain's per-step cost and
database bytes per task. Each size uses a fresh SQLite file (``synchronous=FULL``).
Prints one JSON line per measurement::

    .venv/bin/python bench/scale_bench.py --sizes 500 5000 --chain 500 5000 \
        --sequential 500 5000 50000

The resume clock covers opening the store and executing the run to its end (one step
left); a finished run's re-submit and read are medians of 20 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import _execute, _workspace, chain_workflow, fanout_workflow, roll  # noqa: E402

from agentctl.engine.core.records import load_run_state  # noqa: E402
from agentctl.engine.run.outcome import finished_outcome  # noqa: E402
from agentctl.store.engine import open_store  # noqa: E402

REPEAT = 20


def _median_ms(call: object, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 3)


def w3(n: int) -> dict[str, object]:
    result = roll(_with_output(chain_workflow(n), n))
    store = result["store"]
    run_id = result["run_id"]

    def read() -> None:
        with store.read() as conn:
            load_run_state(conn, run_id)

    out = {
        "bench": "agentctl",
        "workload": "W3_scale",
        "tasks": n,
        "rerun_ms": _median_ms(lambda: finished_outcome(store, run_id)),
        "read_ms": _median_ms(read),
        "first_run_s": round(result["wall_s"], 4),
    }
    store.close()
    return out


def _with_output(text: str, n: int) -> str:
    """The chain declaring one small result (the last step's value) instead of returning
    every step's output."""
    return text.replace(
        "  tasks:\n",
        f'  outputs: {{last: "${{{{ tasks.s{n - 1}.output.output.i }}}}"}}\n  tasks:\n',
    )


def w3b(n: int, *, declared: bool = False) -> dict[str, object]:
    """A chain of ``n + 1`` steps killed right after step ``n`` committed. Without
    ``declared`` the run's output is every step's output (W3b of the peers' harness)."""
    text = chain_workflow(n + 1)
    wf, db = _workspace(_with_output(text, n + 1) if declared else text)
    child = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent / "engine_bench.py"),
            "--child",
            str(wf),
            str(db),
        ],
        env={**os.environ, "AGENTCTL_FAULT": f"task.committed:{n}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert child.returncode == -9, child.stderr
    run_id = child.stdout.strip().splitlines()[0]
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
        "workload": "W3b_scale_declared_output" if declared else "W3b_scale",
        "resume_at_step": n + 1,
        "wall_ms": round(wall * 1000, 2),
        "cpu_ms": round(cpu * 1000, 2),
        "open_ms": round(opened * 1000, 2),
    }


def chain(n: int) -> dict[str, object]:
    """Per-step cost and database bytes per task of one long chain."""
    result = roll(chain_workflow(n))
    store = result["store"]
    store.close()
    db: Path = result["db"]
    size = db.stat().st_size + sum(
        p.stat().st_size for p in db.parent.glob(db.name + "-wal") if p.exists()
    )
    return {
        "bench": "agentctl",
        "workload": "chain_scale",
        "tasks": n,
        "wall_s": round(result["wall_s"], 3),
        "per_step_us": round(result["wall_s"] / n * 1e6, 1),
        "cpu_per_step_us": round(result["cpu_s"] / n * 1e6, 1),
        "compile_s": round(result["compile_s"], 3),
        "db_bytes_per_task": round(size / n),
        "commits_per_step": round(result["commits"] / n, 3),
    }


def sequential_foreach(n: int) -> str:
    """``n`` durable steps one at a time, as one foreach at concurrency 1: a 50,000-step
    chain written out task by task would exceed the 1 MiB workflow file limit."""
    return fanout_workflow(n).replace(
        "  runtime: {maxConcurrency: 64}",
        f"  runtime: {{maxConcurrency: 1, limits: {{maxItemsPerExpansion: {max(n, 256)}}}}}",
    )


def long_run(n: int) -> dict[str, object]:
    """Per-step cost and database bytes per task of ``n`` sequential steps (plus the
    join reading every output)."""
    result = roll(sequential_foreach(n))
    result["store"].close()
    db: Path = result["db"]
    return {
        "bench": "agentctl",
        "workload": "sequential_foreach_scale",
        "steps": n,
        "wall_s": round(result["wall_s"], 3),
        "per_step_us": round(result["wall_s"] / n * 1e6, 1),
        "cpu_per_step_us": round(result["cpu_s"] / n * 1e6, 1),
        "compile_s": round(result["compile_s"], 3),
        "db_bytes_per_task": round(db.stat().st_size / n),
        "commits_per_step": round(result["commits"] / n, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="*", default=[500, 5000])
    parser.add_argument("--chain", type=int, nargs="*", default=[])
    parser.add_argument("--sequential", type=int, nargs="*", default=[])
    parser.add_argument("--only", choices=["w3", "w3b", "w3b_declared", "chain"], nargs="*")
    args = parser.parse_args()
    only = set(args.only or ["w3", "w3b", "w3b_declared", "chain"])
    roll(chain_workflow(5))  # warm-up: lazily imported modules
    for n in args.sizes:
        if "w3" in only:
            print(json.dumps(w3(n)), flush=True)
        if "w3b" in only:
            print(json.dumps(w3b(n)), flush=True)
        if "w3b_declared" in only:
            print(json.dumps(w3b(n, declared=True)), flush=True)
    for n in args.chain if "chain" in only else []:
        print(json.dumps(chain(n)), flush=True)
    for n in args.sequential:
        print(json.dumps(long_run(n)), flush=True)


if __name__ == "__main__":
    main()
