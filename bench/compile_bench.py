"""Compile-time benchmark: generated workflows with 1,000 / 5,000 / 10,000 foreach children.

Each workflow has ``N / chunk`` foreach tasks of ``--chunk`` items (default 250, within the
default hard cap of 256 per foreach; ``CompileSettings.hard_max_expansion_items`` is set to
the chunk size, so a larger ``--chunk`` raises the cap), a downstream task reading every
aggregate, and a 64-iteration loop. Timing excludes document validation: only
``compile_workflow`` on an already validated :class:`~agentctl.spec.Workflow` (including its
``model_dump``), best of ``--repeat`` runs.

Run: ``.venv/bin/python bench/compile_bench.py`` — prints a table, then one JSON line per
size: ``{"bench": "compile", "tasks": N, "seconds": s, "tasks_per_second": r}``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from agentctl.compiler import CompileSettings, compile_workflow
from agentctl.spec import Workflow

DEFAULT_CHUNK = 250


def build_document(
    children: int, chunk_size: int = DEFAULT_CHUNK, loop_iterations: int = 64
) -> dict[str, Any]:
    """A workflow with ``children`` foreach children in chunks of ``chunk_size`` and a loop."""
    chunks = max(1, -(-children // chunk_size))
    tasks: list[dict[str, Any]] = [
        {"id": "seed", "uses": "action:set", "with": {"channel": "${{ inputs.channel }}"}}
    ]
    for chunk in range(chunks):
        size = min(chunk_size, children - chunk * chunk_size)
        tasks.append(
            {
                "id": f"fan{chunk}",
                "uses": "action:set",
                "needs": ["seed"],
                "foreach": {
                    "items": [
                        {"n": chunk * chunk_size + i, "name": f"item-{i}"} for i in range(size)
                    ],
                    "maxItems": chunk_size,
                },
                "with": {
                    "item": "${{ vars.item.name }}",
                    "channel": "${{ tasks.seed.output.output.channel }}",
                },
            }
        )
    tasks.append(
        {
            "id": "collect",
            "uses": "action:set",
            "needs": [f"fan{chunk}" for chunk in range(chunks)],
            "with": {"first": "${{ tasks.fan0.output.items }}"},
        }
    )
    tasks.append(
        {
            "id": "poll",
            "uses": "action:set",
            "needs": ["collect"],
            "loop": {
                "maxIterations": loop_iterations,
                "while": "${{ vars.loopIndex < 3 }}",
                "initial": {"round": 0},
            },
            "with": {"round": "${{ vars.loopIndex }}"},
        }
    )
    return {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": f"bench-{children}"},
        "spec": {
            "inputs": {"channel": "nightly"},
            "runtime": {"maxConcurrency": 8},
            "actions": {"set": {"kind": "builtin.assign"}},
            "tasks": tasks,
        },
    }


def measure(children: int, repeat: int, chunk_size: int) -> tuple[int, float]:
    document = Workflow.model_validate(build_document(children, chunk_size))
    settings = CompileSettings(hard_max_expansion_items=max(256, chunk_size))
    best = float("inf")
    planned = 0
    for _ in range(repeat):
        started = time.perf_counter()
        result = compile_workflow(document, settings=settings)
        elapsed = time.perf_counter() - started
        if result.plan is None:
            raise SystemExit(f"compile failed: {[d.message for d in result.diagnostics]}")
        planned = len(result.plan.tasks)
        best = min(best, elapsed)
    return planned, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 5000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK)
    args = parser.parse_args()
    rows = [(size, *measure(size, args.repeat, args.chunk)) for size in args.sizes]
    print(f"{'children':>10} {'plan tasks':>11} {'seconds':>9} {'tasks/s':>10}")
    for size, tasks, seconds in rows:
        print(f"{size:>10} {tasks:>11} {seconds:>9.3f} {tasks / seconds:>10.0f}")
    for _, tasks, seconds in rows:
        record = {
            "bench": "compile",
            "tasks": tasks,
            "seconds": round(seconds, 4),
            "tasks_per_second": round(tasks / seconds),
        }
        print(json.dumps(record))


if __name__ == "__main__":
    main()
