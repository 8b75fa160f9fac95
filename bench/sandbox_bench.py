"""Start cost of a sandboxed step against a plain one (``isolation: sandbox``).

The same command (``/bin/true``) is run through the one launch path of a process action,
:func:`agentctl.process.run_process` with the command line
:mod:`agentctl.engine.core.isolation` builds, three ways, interleaved so host load hits
them alike:

- ``process``: ``isolation: process``, the command on the host;
- ``sandbox``: ``isolation: sandbox`` without limits (bubblewrap, no network);
- ``sandbox+limits``: with every limit (``prlimit`` for CPU and file size, a cgroup for
  memory and processes, created and removed around each run).

Each figure is the median and the 90th percentile of ``--runs`` runs, in milliseconds,
from spawn to reaped exit; ``extra`` is the median minus the plain run's. The goal of
docs/isolation.md is under 20 ms extra for a sandbox without limits. ``run_process``
notices the exit by polling with a backoff (1, 2, 4 … 20 ms), which rounds every run up;
the ``direct`` rows run the same command lines with ``subprocess.run`` to show the
sandbox's own cost without that rounding.

Run: ``.venv/bin/python bench/sandbox_bench.py [--runs 50] [--record]``. Prints one JSON
line per mode; ``--record`` appends the figures to bench/RESULTS.md under "## Sandbox".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentctl import process
from agentctl.engine.core import isolation
from agentctl.policy.paths import WorkspacePolicy

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DESCRIPTION = (
    "`bench/sandbox_bench.py`: `/bin/true` through `process.run_process` with the command\n"
    "line `engine/core/isolation.py` builds, as `isolation: process`, `isolation: sandbox`\n"
    "without limits and with every limit (prlimit + a cgroup per run); interleaved runs,\n"
    "median and p90 in ms from spawn to reaped exit. Goal: sandbox under 20 ms extra."
)

LIMITS = {"cpuSeconds": 10, "memoryBytes": 64 << 20, "processes": 16, "fileSizeBytes": 1 << 20}
MODES: dict[str, dict[str, Any]] = {
    "process": {},
    "sandbox": {"isolation": "sandbox"},
    "sandbox+limits": {"isolation": "sandbox", "sandbox": {"limits": LIMITS}},
}


async def measure(runs: int, workspace: Path) -> dict[str, list[float]]:
    policy = WorkspacePolicy(workspace, ".", ["out"])
    launches = {
        mode: await isolation.launch_for(
            {"kind": "builtin.shell.exec", "command": "true", **extra}, ["true"]
        )
        for mode, extra in MODES.items()
    }
    timings: dict[str, list[float]] = {mode: [] for mode in MODES}
    for index in range(runs + 1):
        for mode, launch in launches.items():
            effect_id = f"{index:064x}"
            started = time.perf_counter()
            argv = launch.argv(
                "true", [], effect_id=effect_id, workspace=policy, cwd=workspace, env_names=[]
            )
            result = await process.run_process(
                process.ProcessSpec(argv=argv, cwd=workspace, env={}, timeout_seconds=30)
            )
            isolation.settle(launch, effect_id, "run", result)
            elapsed = (time.perf_counter() - started) * 1000
            if result.exit_code != 0:
                raise SystemExit(f"{mode}: exit {result.exit_code}: {result.stderr!r}")
            if index:  # the first round warms caches and the bubblewrap probe
                timings[mode].append(elapsed)
            if mode != "sandbox+limits":
                started = time.perf_counter()
                subprocess.run(argv, cwd=workspace, env={}, check=True)
                if index:
                    direct = timings.setdefault(f"{mode} (direct)", [])
                    direct.append((time.perf_counter() - started) * 1000)
    return timings


def summarise(timings: dict[str, list[float]]) -> list[dict[str, Any]]:
    lines = []
    for mode, values in timings.items():
        plain = statistics.median(timings["process (direct)" if "direct" in mode else "process"])
        median = statistics.median(values)
        lines.append(
            {
                "mode": mode,
                "runs": len(values),
                "median_ms": round(median, 2),
                "p90_ms": round(statistics.quantiles(values, n=10)[-1], 2),
                "extra_ms": round(median - plain, 2),
            }
        )
    return lines


def record(lines: list[dict[str, Any]]) -> None:
    """Append a run to bench/RESULTS.md; earlier sections are never rewritten."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    headings = [h for h in text.splitlines() if h.startswith("## ")]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    block: list[str] = []
    if "## Sandbox" not in headings:
        block += ["", "## Sandbox", "", DESCRIPTION]
    elif not headings[-1].startswith("## Sandbox"):
        block += ["", f"## Sandbox, run of {stamp}", "", DESCRIPTION]
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    block += [
        "",
        f"Run of {stamp}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {load}:",
        "",
        "| mode | runs | median ms | p90 ms | extra ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for item in lines:
        block.append(
            f"| {item['mode']} | {item['runs']} | {item['median_ms']} | {item['p90_ms']} | "
            f"{item['extra_ms']} |"
        )
    block += ["", "```", *(json.dumps(item) for item in lines), "```", ""]
    with RESULTS.open("a") as handle:
        if not text.endswith("\n"):
            handle.write("\n")
        handle.write("\n".join(block))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--record", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentctl-sandbox-bench-") as scratch:
        timings = asyncio.run(measure(options.runs, Path(scratch)))
    lines = summarise(timings)
    for line in lines:
        print(json.dumps(line))
    if options.record:
        record(lines)


if __name__ == "__main__":
    main()
