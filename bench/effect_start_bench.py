"""W1 and W2 with an effect in every step: what one commit less per ungated effect saves.

engine_bench.py's W1 and W2 steps are ``builtin.assign`` (pure: no effect, nothing
journaled), so they cannot show the effect protocol's commits. Here every step is an
effect never gated under ``approval: never``, whose dispatch is cheap, so the journal's
commits are most of a step's cost: W1e is N sequential ``builtin.memory.write`` steps, W2e
an N-way foreach (maxConcurrency 64) of ``builtin.write`` (a file each: a templated memory
key needs a declared set) and its join. Run it with the ``PYTHONPATH`` of the checkout to
measure; A/B by alternating two checkouts in the same minutes (bench/RESULTS.md). One JSON
line per measurement, with the commits per step of an untimed, counted run of the same
workflow.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_bench  # noqa: E402

HEADER = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: {name}}}
spec:
  runtime: {{maxConcurrency: {concurrency}}}
  policy: {{approval: never, writableRoots: [out]}}
  actions:
    step: {{kind: builtin.memory.write}}
    save: {{kind: builtin.write}}
    set: {{kind: builtin.assign}}
  tasks:
"""


def chain(n: int) -> str:
    lines = [HEADER.format(name="w1e-sequential-effects", concurrency=1)]
    for i in range(n):
        needs = f", needs: [s{i - 1}]" if i else ""
        lines.append(
            f"    - {{id: s{i}, uses: 'action:step', with: {{key: k{i}, value: {i}}}{needs}}}\n"
        )
    return "".join(lines)


def fanout(n: int) -> str:
    return (
        HEADER.format(name="w2e-fanout-effects", concurrency=64)
        + f"""    - id: unit
      uses: action:save
      foreach: {{items: {list(range(n))}, maxItems: {n}}}
      with: {{path: "out/f${{{{ vars.item }}}}.txt", content: "item ${{{{ vars.item }}}}"}}
    - id: join
      uses: action:set
      needs: [unit]
      with: {{items: "${{{{ tasks.unit.output.items }}}}"}}
"""
    )


def measure(workload: str, text: str, n: int, label: str) -> dict[str, object]:
    result = engine_bench.roll(text)
    result["store"].close()
    commits = engine_bench.commits_of(text)
    return {
        "bench": "agentctl",
        "checkout": label,
        "workload": workload,
        "n": n,
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "commits_per_step": None if commits is None else commits / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n1", type=int, default=200)
    parser.add_argument("--n2", type=int, default=200)
    parser.add_argument("--label", default=os.environ.get("PYTHONPATH", "?"))
    args = parser.parse_args()
    for workload, text, n in (
        ("W1e_sequential_effects", chain(args.n1), args.n1),
        ("W2e_foreach_effects", fanout(args.n2), args.n2),
    ):
        print(json.dumps(measure(workload, text, n, args.label)), flush=True)


if __name__ == "__main__":
    main()
