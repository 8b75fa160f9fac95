"""W2 of two checkouts, alternated run by run: an A/B that holds up on a loaded machine.

Each checkout gets one long-lived worker process (its own ``.venv`` and code, warmed up
once); the driver then asks them in turn for one W2 each, in a shuffled order per pair, so
both sides of a pair ran within the same second or two. The load of other processes
changes from minute to minute; within a pair it hardly does, so the median of the pairs'
ratios (``cpu_s`` and wall) is what to read, beside each side's medians::

    .venv/bin/python bench/ab_pairs.py --base ../main-copy --new . --pairs 80 --out ab.jsonl

Every W2 is one JSON line in ``--out`` (``variant`` base or new, ``round`` the pair).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path


def worker(label: str, n: int) -> None:
    sys.path.insert(0, str(Path.cwd() / "bench"))
    import engine_bench as eb

    eb.COUNT_COMMITS = False
    eb.w1(5)
    eb.w2(20)
    eb.w2(n)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        print(json.dumps({**eb.w2(n), "variant": label}), flush=True)


def drive(base: Path, new: Path, pairs: int, n: int, out: Path) -> None:
    procs = {}
    for label, checkout in (("base", base), ("new", new)):
        proc = subprocess.Popen(
            [str(checkout / ".venv/bin/python"), __file__, "--worker", label, "--n", str(n)],
            cwd=checkout,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        procs[label] = proc
    rng = random.Random(7)
    rows = []
    with out.open("a") as sink:
        for index in range(pairs):
            order = ["base", "new"]
            rng.shuffle(order)
            for label in order:
                proc = procs[label]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                row = {**json.loads(proc.stdout.readline()), "round": index}
                rows.append(row)
                sink.write(json.dumps(row) + "\n")
                sink.flush()
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        proc.wait()
    summary(rows)


def summary(rows: list[dict[str, object]]) -> None:
    def of(label: str, key: str) -> list[float]:
        return [float(r[key]) for r in rows if r["variant"] == label]  # type: ignore[arg-type]

    for label in ("base", "new"):
        print(
            f"{label}: cpu_s median {statistics.median(of(label, 'cpu_s')) * 1e3:.1f} ms, "
            f"wall median {statistics.median(of(label, 'wall_s')) * 1e3:.1f} ms"
        )
    for key in ("cpu_s", "wall_s"):
        ratios = []
        for index in sorted({r["round"] for r in rows}):  # type: ignore[type-var]
            pair = {r["variant"]: float(r[key]) for r in rows if r["round"] == index}  # type: ignore[arg-type]
            ratios.append(pair["new"] / pair["base"])
        print(f"median of the pairs' new/base {key}: {statistics.median(ratios):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--base", type=Path)
    parser.add_argument("--new", type=Path, default=Path.cwd())
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--n", type=int, default=200, help="W2's fan-out width")
    parser.add_argument("--out", type=Path, default=Path("ab-pairs.jsonl"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.n)
        return
    if args.base is None:
        parser.error("--base CHECKOUT is required (a worktree of the code to compare against)")
    drive(args.base.resolve(), args.new.resolve(), args.pairs, args.n, args.out)


if __name__ == "__main__":
    main()
