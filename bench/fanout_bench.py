"""A 10,000-item foreach: compile time, run time and peak memory (issue: raised caps).

The fan-out workflow of engine_bench (``builtin.assign`` units, a join reading every
output) with ``runtime.limits.maxItemsPerExpansion`` raised to fit. Prints one JSON line
per size for the peers' harness (``EXTRA_BENCH``)::

    .venv/bin/python bench/fanout_bench.py --items 1000 10000
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import _execute, _workspace, fanout_workflow  # noqa: E402

from agentctl.engine.run.creation import create_run, prepare_run  # noqa: E402
from agentctl.ids import IdGenerator, SystemClock  # noqa: E402
from agentctl.store.engine import open_store  # noqa: E402


def raised(n: int) -> str:
    text = fanout_workflow(n)
    return text.replace(
        "  runtime: {maxConcurrency: 64}",
        f"  runtime: {{maxConcurrency: 64, limits: {{maxItemsPerExpansion: {max(n, 256)}}}}}",
    )


def measure(n: int) -> dict[str, object]:
    wf, db = _workspace(raised(n))
    started = time.perf_counter()
    prepared = prepare_run(str(wf))
    compiled = time.perf_counter() - started
    store = open_store(str(db))
    clock = SystemClock()
    started = time.perf_counter()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    outcome = _execute(store, run_id)
    ran = time.perf_counter() - started
    store.close()
    assert outcome.state == "succeeded", outcome.error
    assert len(outcome.output["join"]["output"]["items"]) == n
    return {
        "bench": "agentctl",
        "workload": f"fanout_{n}",
        "items": n,
        "tasks": len(prepared.plan.order),
        "compile_s": round(compiled, 4),
        "wall_s": round(ran, 4),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, nargs="+", default=[10_000])
    for n in parser.parse_args().items:
        print(json.dumps(measure(n)), flush=True)


if __name__ == "__main__":
    main()
