"""A CPU-time sampling profiler for ``agentctl worker`` processes started by a benchmark.

    AGENTCTL_CPU_SAMPLES=/tmp/worker BENCH_PYTHONPATH=bench/cpu_sampler \\
        .venv/bin/python bench/pg_bench.py --workers 1 --concurrency 2 --variant sleep \\
        --skip-standard

Each worker writes ``/tmp/worker.<pid>`` at exit: one line per distinct Python stack of its
main thread, ``frame;frame;… count``, the count in samples of ``ITIMER_PROF`` (the process's
CPU time, user and system: the kernel delivers it at most once per scheduler tick, so a
sample stands for about 4 ms). Unlike cProfile, whose per-call cost triples a worker's CPU
and inflates code made of many small calls, and unlike a wall-clock sampler, which on a
loaded machine counts a thread that waits for a core as busy, this weighs each stack by
the CPU it used. Time spent in C (the driver, a system call) is charged to the Python line
that called it.
"""

from __future__ import annotations

import atexit
import collections
import os
import signal
import sys
from types import FrameType

_OUT = os.environ.get("AGENTCTL_CPU_SAMPLES")

if _OUT and "worker" in sys.argv:
    _counts: collections.Counter[str] = collections.Counter()

    def _where(frame: FrameType) -> str:
        code = frame.f_code
        name = code.co_filename.rsplit("site-packages/", 1)[-1]
        return f"{name}:{code.co_name}:{frame.f_lineno}"

    def _sample(_signum: int, frame: FrameType | None) -> None:
        stack = []
        while frame is not None:
            stack.append(_where(frame))
            frame = frame.f_back
        _counts[";".join(reversed(stack))] += 1

    def _write() -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        with open(f"{_OUT}.{os.getpid()}", "w", encoding="utf-8") as out:
            for stack, count in _counts.items():
                out.write(f"{stack} {count}\n")

    signal.signal(signal.SIGPROF, _sample)
    signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
    atexit.register(_write)
