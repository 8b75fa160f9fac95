"""PostgreSQL benchmarks: W1 and W2 of the peers' WORKLOADS.md with one worker, and a
400-task fan-out of 50 ms process steps spread over 1, 2, 4 and 8 workers.

    .venv/bin/python bench/pg_bench.py                    # starts a throwaway server
    .venv/bin/python bench/pg_bench.py --url postgresql://agentctl@127.0.0.1:5432/postgres

``--url`` names a server whose user may create databases (each measurement gets a fresh
one); without it a server is started from the machine's binaries, like the test suite's,
but with durability on (``fsync``, ``synchronous_commit``). Prints one JSON line per
measurement in the peers' format, so ``EXTRA_BENCH=".venv/bin/python bench/pg_bench.py
--url URL"`` merges them into the peers' table; bench/pg_dbos_bench.py runs DBOS on the
same server (``--dbos`` here runs it with the peers' interpreter and prints its lines too).

- ``W1_sequential`` / ``W2_foreach_join``: 500 chained ``builtin.assign`` steps; 200
  independent ones and a join (``maxConcurrency: 64``). ``variant=worker``: the run is
  released to one ``agentctl worker`` process (the clock runs from creating the run to
  ``runs wait``'s answer); ``variant=in_process``: executed by this process, as ``roll``.
- ``scale_400x50ms``: 400 ``sleep 0.05`` process steps and a join, ``maxConcurrency: 64``,
  with N workers of ``--concurrency 8``; throughput = 400 / wall, and the claim latency
  (a task published ready → claimed by a worker) median and p99 from the workers' events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bench import chain_workflow, fanout_workflow  # noqa: E402

from agentctl.engine.faults import Faults  # noqa: E402
from agentctl.engine.run.creation import create_run, prepare_run  # noqa: E402
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor  # noqa: E402
from agentctl.engine.worker import detach_run, wait_for_run  # noqa: E402
from agentctl.ids import IdGenerator, SystemClock  # noqa: E402
from agentctl.store.engine import Store, open_store  # noqa: E402

PEERS_PYTHON = "/tmp/peers-venv/bin/python"


def scale_workflow(n: int) -> str:
    return f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: scale}}
spec:
  runtime: {{maxConcurrency: 64, limits: {{maxItemsPerExpansion: {max(n, 256)}}}}}
  policy: {{approval: never, processAllowlist: [sleep]}}
  actions:
    wait: {{kind: builtin.shell.exec, command: sleep, args: ["0.05"]}}
    step: {{kind: builtin.assign}}
  tasks:
    - id: unit
      uses: action:wait
      foreach: {{items: {list(range(n))}, maxItems: {n}}}
    - id: join
      uses: action:step
      needs: [unit]
      with: {{items: "${{{{ tasks.unit.output.items }}}}"}}
"""


class Server:
    """A database server: fresh databases at the current schema, from a template."""

    def __init__(self, url: str | None) -> None:
        self.cluster: Any = None
        if url is None:
            from tests.pg.cluster import start_cluster

            self.cluster = start_cluster(durable=True)
            url = self.cluster.admin_url
        self.admin_url = url
        self.template = self._create("bench_template")
        open_store(self.url(self.template)).close()
        self._n = 0

    def url(self, name: str) -> str:
        return f"{self.admin_url.rpartition('/')[0]}/{name}"

    def _create(self, name: str, template: str | None = None) -> str:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return name

    def fresh(self) -> str:
        self._n += 1
        return self.url(self._create(f"bench_{os.getpid()}_{self._n}", self.template))

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()


class Worker:
    """An ``agentctl worker`` process; its events are collected by a thread."""

    def __init__(self, url: str, ws: Path, name: str, concurrency: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentctl", "--output", "jsonl", "worker", "--name", name]
            + ["--concurrency", str(concurrency), "--db", url],
            cwd=ws,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"},
        )
        self.events: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            data = json.loads(line).get("data") or {}
            self.events.append(data)
            if data.get("state") == "ready":
                self.ready.set()
        self.ready.set()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=120)
        self._thread.join(timeout=60)


def _workspace(text: str) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="agentctl-pgbench-", dir=os.environ.get("BENCH_TMP")))
    (ws / "wf.yaml").write_text(text)
    return ws


def with_workers(
    server: Server, text: str, workers: int, concurrency: int
) -> tuple[float, list[Worker]]:
    """Run the workflow by ``workers`` worker processes; (wall seconds, the workers)."""
    ws = _workspace(text)
    url = server.fresh()
    prepared = prepare_run(str(ws / "wf.yaml"), workspace=str(ws))
    pool = [Worker(url, ws, f"w{i + 1}", concurrency) for i in range(workers)]
    for worker in pool:
        worker.ready.wait(120)
    store = open_store(url)
    clock = SystemClock()
    try:
        started = time.perf_counter()
        run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
        detach_run(store, run_id)
        state = asyncio.run(wait_for_run(store, run_id))
        wall = time.perf_counter() - started
        assert state == "succeeded", state
    finally:
        for worker in pool:
            worker.stop()
        store.close()
    return wall, pool


def in_process(server: Server, text: str) -> float:
    ws = _workspace(text)
    url = server.fresh()
    prepared = prepare_run(str(ws / "wf.yaml"), workspace=str(ws))
    store: Store = open_store(url)
    clock = SystemClock()
    try:
        started = time.perf_counter()
        run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
        options = ExecutionOptions(faults=Faults(""), cancel_poll_seconds=3600)
        outcome = asyncio.run(RunExecutor(store, run_id, clock=clock, options=options).execute())
        wall = time.perf_counter() - started
    finally:
        store.close()
    assert outcome.state == "succeeded", outcome.error
    return wall


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def standard(server: Server) -> list[dict[str, Any]]:
    out = []
    for workload, text, n in (
        ("W1_sequential", chain_workflow(500), 500),
        ("W2_foreach_join", fanout_workflow(200), 200),
    ):
        wall, _ = with_workers(server, text, 1, 8)
        out.append(_line(workload, "worker", wall, n))
        out.append(_line(workload, "in_process", in_process(server, text), n))
    return out


def _line(workload: str, variant: str, wall: float, n: int) -> dict[str, Any]:
    return {
        "bench": "agentctl-postgresql",
        "workload": workload,
        "durability": variant,
        "wall_s": round(wall, 4),
        "steps_per_s": round(n / wall, 1),
        "load_avg_1m": _load(),
    }


def scaling(server: Server, counts: list[int], n: int = 400) -> list[dict[str, Any]]:
    out = []
    for workers in counts:
        wall, pool = with_workers(server, scale_workflow(n), workers, 8)
        waited = sorted(
            float(e["waitedMs"]) for w in pool for e in w.events if e.get("state") == "task.claimed"
        )
        by_worker = [sum(1 for e in w.events if e.get("state") == "task.claimed") for w in pool]
        out.append(
            {
                "bench": "agentctl-postgresql",
                "workload": f"scale_{n}x50ms",
                "durability": f"workers={workers}",
                "workers": workers,
                "wall_s": round(wall, 4),
                "steps_per_s": round(n / wall, 1),
                "claim_ms_median": round(statistics.median(waited), 1) if waited else None,
                "claim_ms_p99": round(waited[min(len(waited) - 1, int(len(waited) * 0.99))], 1)
                if waited
                else None,
                "claims": len(waited),
                "claims_by_worker": by_worker,
                "load_avg_1m": _load(),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a server whose user may create databases")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--skip-standard", action="store_true")
    parser.add_argument("--dbos", action="store_true", help="also run DBOS on the same server")
    args = parser.parse_args()
    server = Server(args.url)
    try:
        lines = [] if args.skip_standard else standard(server)
        for line in lines:
            print(json.dumps(line), flush=True)
        if args.dbos:
            dbos_url = server.url(server._create(f"bench_dbos_{os.getpid()}"))
            script = Path(__file__).with_name("pg_dbos_bench.py")
            subprocess.run([PEERS_PYTHON, str(script), dbos_url], check=True, timeout=600)
        for line in scaling(server, args.workers):
            print(json.dumps(line), flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    main()
