"""Whole-process start-up: ``agentctl --help``, ``--version``, ``check
workflows/hello.yaml`` and ``runs list`` (on an empty database the bench creates) beside
``dbos --help``, measured the way hyperfine does.

Each command runs ``--warmup`` times untimed (the first run also writes the bytecode
caches an installed wheel ships with), then ``--runs`` times timed; the commands take
turns within each round so every one sees the same machine load. Prints one JSON line
per command: wall-clock median, mean, standard deviation, min and max, and the median
CPU time (user + system) the process used, which load on a shared machine disturbs far
less than the wall clock. ``python -c pass`` is the interpreter's own floor::

    .venv/bin/python bench/startup_bench.py --runs 30 --dbos /tmp/peers-venv/bin/dbos

``--compare-with DIR`` also times the agentctl package found in DIR (for example
``git archive OLD agentctl | tar -x -C DIR``), taking the same turns, for an A/B.

Goals (issue 19): ``agentctl --help`` at most 0.15 s and ``check`` at most 0.3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # Bytecode caches must be written and used, as for an installed package; a developer
    # shell with PYTHONDONTWRITEBYTECODE would otherwise recompile every module each run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["NO_COLOR"] = "1"
    return env


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {completed.returncode}: {completed.stderr!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--compare-with",
        metavar="DIR",
        help="a directory holding another agentctl package to time beside this one",
    )
    parser.add_argument(
        "--dbos",
        default="/tmp/peers-venv/bin/dbos",
        help="the dbos console script to measure beside agentctl (skipped when absent)",
    )
    args = parser.parse_args()
    agentctl = str(Path(sys.executable).parent / "agentctl")
    env = _environment()
    db = str(Path(tempfile.mkdtemp(prefix="startup-bench-")) / "runs.db")
    _once([agentctl, "db", "migrate", "--db", db], env)
    timed = {
        "agentctl --help": ["--help"],
        "agentctl --version": ["--version"],
        "agentctl check workflows/hello.yaml": ["check", "workflows/hello.yaml"],
        "agentctl runs list": ["runs", "list", "--db", db],
    }
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env),
        **{name: ([agentctl, *argv], env) for name, argv in timed.items()},
    }
    if args.compare_with:
        other = {**env, "PYTHONPATH": str(Path(args.compare_with).resolve())}
        for name, argv in timed.items():
            commands[f"{name} (compared)"] = ([agentctl, *argv], other)
    if shutil.which(args.dbos):
        commands["dbos --help"] = ([args.dbos, "--help"], env)
    for argv, command_env in commands.values():
        for _ in range(args.warmup):
            _once(argv, command_env)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (argv, command_env) in commands.items():
            wall, cpu = _once(argv, command_env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    load = os.getloadavg()[0]
    for name in commands:
        wall = walls[name]
        print(
            json.dumps(
                {
                    "bench": "startup",
                    "command": name,
                    "runs": args.runs,
                    "median_s": round(statistics.median(wall), 4),
                    "mean_s": round(statistics.fmean(wall), 4),
                    "stddev_s": round(statistics.stdev(wall), 4) if len(wall) > 1 else 0.0,
                    "min_s": round(min(wall), 4),
                    "max_s": round(max(wall), 4),
                    "cpu_median_s": round(statistics.median(cpus[name]), 4),
                    "load_1m": round(load, 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
