"""The cost of a ``ctx`` operation in a ``python.function`` step against the same effect as
a task of its own (docs/python-steps.md; goal: within 1.5x).

- ``tasks``: N sequential ``builtin.write`` tasks, each writing one file;
- ``ctx``: one function step calling ``ctx.write`` N times for the same files;
- ``empty``: one function step that returns at once (its process start and the task).

Per operation, ``ctx`` is ``(ctx - empty) / N``: what one more operation costs once the
step runs. ``synchronous=FULL`` (the default); a fresh SQLite file per measurement. Prints
one JSON line per workload and a summary line with the ratio.

    python bench/python_step_bench.py --ops 200 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentctl.engine.core.faults import Faults
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store.engine import open_store

HEADER = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: python-step-bench}
spec:
  policy: {approval: never, writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
    step: {kind: python.function, function: "steps:main", timeoutSeconds: 600}
  tasks:
"""

STEPS = """
def main(ctx, inputs):
    for i in range(inputs["n"]):
        ctx.write(f"out/f{i}.txt", f"content {i}")
    return {"written": inputs["n"]}
"""


def tasks_workflow(n: int) -> str:
    lines = [HEADER]
    for i in range(n):
        needs = f", needs: [w{i - 1}]" if i else ""
        lines.append(
            f"    - {{id: w{i}, uses: 'action:save', "
            f"with: {{path: out/f{i}.txt, content: 'content {i}'}}{needs}}}\n"
        )
    return "".join(lines)


def function_workflow(n: int) -> str:
    return HEADER + f"    - {{id: fn, uses: 'action:step', with: {{n: {n}}}}}\n"


def roll(text: str) -> float:
    root = Path(tempfile.mkdtemp(prefix="agentctl-bench-", dir=os.environ.get("BENCH_TMP")))
    (root / "wf.yaml").write_text(text)
    (root / "steps.py").write_text(STEPS)
    prepared = prepare_run(str(root / "wf.yaml"))
    store = open_store(str(root / "runtime.db"))
    clock = SystemClock()
    started = time.perf_counter()
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    options = ExecutionOptions(faults=Faults(""), cancel_poll_seconds=3600)
    outcome = asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())
    wall = time.perf_counter() - started
    store.close()
    assert outcome.state == "succeeded", outcome.error
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.ops
    samples: dict[str, list[float]] = {"tasks": [], "ctx": [], "empty": []}
    for _ in range(args.repeat):  # alternated, so load on the machine hits all three alike
        samples["tasks"].append(roll(tasks_workflow(n)))
        samples["ctx"].append(roll(function_workflow(n)))
        samples["empty"].append(roll(function_workflow(0)))
    median = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        print(json.dumps({"workload": name, "ops": n, "wall_s": values}))
    per_task = median["tasks"] / n
    per_op = (median["ctx"] - median["empty"]) / n
    summary: dict[str, Any] = {
        "per_task_ms": round(per_task * 1000, 3),
        "per_ctx_op_ms": round(per_op * 1000, 3),
        "step_start_ms": round(median["empty"] * 1000, 1),
        "ratio": round(per_op / per_task, 3),
        "goal": 1.5,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
