"""CPU per claimed-task write transaction on PostgreSQL, client and server, A/B by checkout.

One claimed task's write that needs no run lock (the effect journaled ``requested``: its
``BEGIN`` with the store lock, the insert, the claim's fence, the ``COMMIT``), repeated
``--transactions`` times on one driver session, in a child process per checkout, the
checkouts alternated ``--rounds`` times on one throwaway server (durable settings kept).
Measured per transaction: the child's CPU (``time.process_time``), its server backend's
CPU (``/proc/PID/stat``, utime + stime, in clock ticks: coarse, hence thousands of
transactions) and the wall time. Every line is printed as JSON (``--out`` appends them to a
file too).

    python bench/pg_pipe_bench.py --checkouts /work/main . --rounds 3 --transactions 3000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, os, sys, time
from pathlib import Path
from agentctl.engine.effects import journal
from agentctl.engine.run.claimed_tasks import ClaimFence
from tests.pg.test_claim_fences import NOW, _claims
from tests.pg.test_claim_slots import _running_run

url, work, count, late = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
store, run_id, tasks = _running_run(url, work, 1)
(claim,) = _claims(store, run_id, tasks)
fence = ClaimFence(store, claim)
spec = journal.EffectSpec.classified("builtin.shell.exec", {"argv": ["true"]})
tick = os.sysconf("SC_CLK_TCK")

def backend_cpu(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def write(session, n):
    with session.write() as conn:
        journal.request_effect(conn, run_id=run_id, task_id=claim.task_id, attempt=1,
                               ordinal=n, spec=spec, now=NOW)
        if late:
            from agentctl.store import locks
            locks.hold_run(conn, run_id)

with store.driver_session(late_fence=fence) as session:
    pid = session.exec_driver_sql("SELECT pg_backend_pid()", None).first()[0]
    for n in range(1, 201):
        write(session, n)
    cpu, server, wall = time.process_time(), backend_cpu(pid), time.perf_counter()
    for n in range(201, 201 + count):
        write(session, n)
    cpu, server, wall = (time.process_time() - cpu, backend_cpu(pid) - server,
                         time.perf_counter() - wall)
    same = session.exec_driver_sql("SELECT pg_backend_pid()", None).first()[0] == pid
store.close()
per = lambda seconds: round(seconds / count * 1e6, 1)
print(json.dumps({"client_us": per(cpu), "server_us": per(server), "wall_us": per(wall),
                  "same_backend": same}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkouts", nargs="+", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=3000)
    parser.add_argument("--late", action="store_true", help="take the run's lock late too")
    parser.add_argument("--out", help="append the JSON lines to this file")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(here))
    from tests.pg.cluster import start_cluster

    cluster = start_cluster(durable=True, own=True)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        for round_ in range(args.rounds):
            order = args.checkouts if round_ % 2 == 0 else list(reversed(args.checkouts))
            for checkout in order:
                path = str(Path(checkout).resolve())
                url = cluster.take_migrated()
                with tempfile.TemporaryDirectory() as work:
                    env["PYTHONPATH"] = path
                    env["AGENTCTL_ARTIFACT_ROOT"] = str(Path(work) / "artifacts")
                    done = subprocess.run(
                        [sys.executable, "-c", _CHILD, url, work, str(args.transactions),
                         "1" if args.late else "0"],
                        cwd=path, env=env, capture_output=True, text=True, check=False,
                    )  # fmt: skip
                if done.returncode != 0:
                    raise SystemExit(done.stderr[-3000:])
                line = {
                    "bench": "pg-pipe-write",
                    "checkout": path,
                    "round": round_,
                    "late_run_lock": args.late,
                    "transactions": args.transactions,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "load1": round(os.getloadavg()[0], 2),
                    **json.loads(done.stdout.strip().splitlines()[-1]),
                }
                print(json.dumps(line), flush=True)
                if args.out:
                    with open(args.out, "a", encoding="utf-8") as out:
                        out.write(json.dumps(line) + "\n")
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
