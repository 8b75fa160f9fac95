"""The parent's CPU per process step: N runs of ``/bin/true`` through ``process.run_process``
(the one function every process step, sandboxed or not, goes through), one after another in
one event loop, as a worker runs its ``builtin.shell.exec`` steps.

CPU is this process's own (``getrusage(RUSAGE_SELF)``: user and system, every thread of
it, the children not included), so other load on the machine changes it little. Prints one
JSON line per round; ``--checkout DIR`` runs another checkout's agentctl for an A/B in one
sitting (the rounds alternate between the checkouts)::

    .venv/bin/python bench/spawn_bench.py --spawns 300 --rounds 3 --checkout /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent

ROUND = """
import asyncio, json, resource, sys
from pathlib import Path
from agentctl.process import ProcessSpec, run_process

spec = ProcessSpec(argv=("/bin/true",), cwd=Path("/"), env={}, timeout_seconds=30)
n = int(sys.argv[1])

async def main():
    for _ in range(10):  # warm: imports, the loop's first selector calls
        await run_process(spec)
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        assert (await run_process(spec)).exit_code == 0
    after = resource.getrusage(resource.RUSAGE_SELF)
    user = (after.ru_utime - before.ru_utime) * 1000 / n
    system = (after.ru_stime - before.ru_stime) * 1000 / n
    print(json.dumps({"user_ms": round(user, 3), "system_ms": round(system, 3),
                      "cpu_ms_per_spawn": round(user + system, 3)}))

asyncio.run(main())
"""


def one_round(checkout: Path, spawns: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", ROUND, str(spawns)],
        env=env,
        cwd=checkout,  # ``-c`` puts the working directory first on sys.path
        capture_output=True,
        text=True,
        check=True,
    )
    line: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkout", help="also run this checkout's agentctl (A/B)")
    args = parser.parse_args()
    checkouts = [CHECKOUT] + ([Path(args.checkout).resolve()] if args.checkout else [])
    for number in range(1, args.rounds + 1):
        for checkout in checkouts:
            line = one_round(checkout, args.spawns)
            record = {"bench": "spawn", "round": number, "checkout": str(checkout), **line}
            print(json.dumps({**record, "spawns": args.spawns}), flush=True)


if __name__ == "__main__":
    main()
