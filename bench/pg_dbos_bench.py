"""DBOS Transact on a PostgreSQL system database: W1 (500 sequential steps), W2a (200 child
workflows) and W2c (200 async steps gathered in one workflow) of the peers' WORKLOADS.md,
beside bench/pg_bench.py on the same server. Run it with the peers' interpreter (DBOS is
not an agentctl dependency):

    /tmp/peers-venv/bin/python bench/pg_dbos_bench.py postgresql://user@host:port/dbname

The database is DBOS's system database (it creates its tables there). One JSON line per
workload, the peers' format with ``journal=postgresql``.
"""

import asyncio
import json
import os
import sys
import time

from dbos import DBOS

N1, N2 = 500, 200


@DBOS.step()
def small_step(i: int) -> dict:
    return {"i": i, "ok": True}


@DBOS.workflow()
def seq_wf(n: int) -> int:
    return sum(small_step(i)["i"] for i in range(n))


@DBOS.workflow()
def child_wf(i: int) -> int:
    return small_step(i)["i"]


@DBOS.workflow()
def fanout_start_wf(n: int) -> int:
    handles = [DBOS.start_workflow(child_wf, i) for i in range(n)]
    return sum(h.get_result() for h in handles)


@DBOS.step()
async def small_step_async(i: int) -> dict:
    return {"i": i, "ok": True}


@DBOS.workflow()
async def fanout_gather_wf(n: int) -> int:
    return sum(r["i"] for r in await asyncio.gather(*[small_step_async(i) for i in range(n)]))


def emit(workload: str, wall: float, n: int) -> None:
    line = {
        "bench": "dbos",
        "workload": workload,
        "journal": "postgresql",
        "wall_s": round(wall, 4),
        "steps_per_s": round(n / wall, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(line), flush=True)


def main(url: str) -> None:
    DBOS(config={"name": "pg-bench", "system_database_url": url, "log_level": "WARNING"})
    DBOS.launch()
    t0 = time.perf_counter()
    assert seq_wf(N1) == sum(range(N1))
    emit("W1_sequential", time.perf_counter() - t0, N1)
    t0 = time.perf_counter()
    assert fanout_start_wf(N2) == sum(range(N2))
    emit("W2a_child_workflows", time.perf_counter() - t0, N2)
    t0 = time.perf_counter()
    assert asyncio.run(fanout_gather_wf(N2)) == sum(range(N2))
    emit("W2c_gather_steps", time.perf_counter() - t0, N2)
    DBOS.destroy()


if __name__ == "__main__":
    main(sys.argv[1])
