"""Artifact ingestion benchmark: 1,000 files of 64 KiB against ``cp`` + ``sha256sum``.

The same files, in the same run, are (1) copied with ``cp -r`` and hashed with
``sha256sum`` as subprocesses — the floor for "copy the bytes and learn their SHA-256" —
and (2) ingested by :class:`~agentctl.artifacts.ArtifactStore` into a fresh database and
store, both one file at a time (``ingest``: one lease commit per file) and as one task's
batch (``ingest_many``: one lease commit per batch). Ingestion also fsyncs every blob and
its folder and takes the cross-process lock, which ``cp`` does not; the database runs with
the default ``synchronous=FULL``. Timings are the best of ``--repeat`` runs and
exclude generating the files and opening the database.

Run: ``.venv/bin/python bench/artifact_bench.py [--files 1000] [--size 65536]
[--repeat 3] [--record]``. Prints one JSON line per measurement; ``--record`` appends the
figures to bench/RESULTS.md under "## Artifacts".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentctl.artifacts import ArtifactStore
from agentctl.ids import SystemClock
from agentctl.store.engine import open_store

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DESCRIPTION = (
    "`bench/artifact_bench.py`: 1,000 files of 64 KiB ingested into a fresh store, against\n"
    "`cp -r` + `sha256sum` of the same files in the same run (subprocesses); best of the\n"
    "repeats, `synchronous=FULL`; ratio = seconds / `cp` + `sha256sum` seconds. Goal: 2x."
)


def make_files(folder: Path, count: int, size: int) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for i in range(count):
        path = folder / f"file-{i:05d}.bin"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    return paths


def best_of(repeat: int, run: Callable[[Path], None], scratch: Path) -> float:
    best = float("inf")
    for attempt in range(repeat):
        target = scratch / f"run-{attempt}"
        target.mkdir()
        started = time.perf_counter()
        run(target)
        best = min(best, time.perf_counter() - started)
        shutil.rmtree(target)
    return best


def cp_and_sha256sum(source: Path, files: list[Path]) -> Callable[[Path], None]:
    def run(target: Path) -> None:
        copy = target / "copy"
        subprocess.run(["cp", "-r", str(source), str(copy)], check=True)
        names = [str(copy / path.name) for path in files]
        subprocess.run(["sha256sum", *names], check=True, stdout=subprocess.DEVNULL)

    return run


def ingest_seconds(files: list[Path], batch: bool, target: Path) -> float:
    """Seconds to ingest ``files`` into a fresh store under ``target``; opening (and
    migrating) the database is setup, not ingestion, so it is outside the clock."""
    with open_store(str(target / "runtime.db")) as store:
        artifacts = ArtifactStore.beside(store, SystemClock())
        artifacts.layout.ensure()
        started = time.perf_counter()
        if batch:
            artifacts.ingest_many(files, holder="bench")
        else:
            for path in files:
                artifacts.ingest(path, holder="bench")
        return time.perf_counter() - started


def measure_ingest(repeat: int, files: list[Path], batch: bool, scratch: Path) -> float:
    best = float("inf")
    for attempt in range(repeat):
        target = scratch / f"ingest-{attempt}"
        target.mkdir()
        best = min(best, ingest_seconds(files, batch, target))
        shutil.rmtree(target)
    return best


def line(mode: str, seconds: float, count: int, size: int, floor: float) -> dict[str, Any]:
    total = count * size
    return {
        "bench": "artifacts",
        "mode": mode,
        "files": count,
        "file_bytes": size,
        "seconds": round(seconds, 4),
        "files_per_second": round(count / seconds),
        "mib_per_second": round(total / seconds / (1024 * 1024), 1),
        "ratio_vs_cp_sha256sum": round(seconds / floor, 2),
    }


def record(lines: list[dict[str, Any]]) -> None:
    """Append a run to bench/RESULTS.md; earlier sections are never rewritten."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    headings = [h for h in text.splitlines() if h.startswith("## ")]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    block: list[str] = []
    if "## Artifacts" not in headings:
        block += ["", "## Artifacts", "", DESCRIPTION]
    elif not headings[-1].startswith("## Artifacts"):
        block += ["", f"## Artifacts, run of {stamp}", "", DESCRIPTION]
    block += [
        "",
        f"Run of {stamp}, Python {platform.python_version()}, {os.cpu_count()} CPUs:",
        "",
        "| mode | seconds | files/s | MiB/s | ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for item in lines:
        block.append(
            f"| {item['mode']} | {item['seconds']:.3f} | {item['files_per_second']:,} | "
            f"{item['mib_per_second']} | {item['ratio_vs_cp_sha256sum']}x |"
        )
    block += ["", "```", *(json.dumps(item) for item in lines), "```", ""]
    with RESULTS.open("a") as handle:
        if not text.endswith("\n"):
            handle.write("\n")
        handle.write("\n".join(block))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--size", type=int, default=64 * 1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", action="store_true", help="append to bench/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="artifact-bench-") as tmp:
        scratch = Path(tmp)
        source = scratch / "source"
        files = make_files(source, args.files, args.size)
        floor = best_of(args.repeat, cp_and_sha256sum(source, files), scratch)
        results = [
            line("cp+sha256sum", floor, args.files, args.size, floor),
            line(
                "agentctl ingest_many (one batch)",
                measure_ingest(args.repeat, files, True, scratch),
                args.files,
                args.size,
                floor,
            ),
            line(
                "agentctl ingest (one file at a time)",
                measure_ingest(args.repeat, files, False, scratch),
                args.files,
                args.size,
                floor,
            ),
        ]
    for item in results:
        print(json.dumps(item), flush=True)
    if args.record:
        record(results)


if __name__ == "__main__":
    main()
