"""The dashboard's runs page with 10,000 runs in the database (goal: under 200 ms).

Builds one SQLite file with ``--runs`` runs made by the engine's own operations: most are
created and left to nobody (``running``, pending tasks), and every ``--executed-every``-th
is executed for real, alternating a workflow that succeeds and one that parks for an
approval, so the page has finished runs, counts of done tasks and waiting approvals to
show. Three workflow names share the runs.

Then it requests pages through the real Starlette application (the ASGI app ``agentctl ui``
serves, TestClient transport, templates rendered) and reports, per page, the median and the
slowest of ``--repeat`` requests after one warm-up: the first page (100 newest runs), the
first page filtered by state, by workflow and by an id search, and the fifth page (keyset
paging through ``before=``). The 1-minute load average is printed with the figures, since
the machine is shared, and ``cpu_ms_median`` (this process's CPU time per request: client,
server and templates together) for a loaded machine, where wall times say little.

    python bench/dashboard_bench.py --runs 10000

Building uses ``AGENTCTL_SQLITE_SYNCHRONOUS=NORMAL`` (fewer fsyncs while filling the file);
the measurement only reads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

OK = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: {name}}}
spec:
  policy: {{approval: never}}
  actions:
    set: {{kind: builtin.assign}}
  tasks:
    - {{id: a, uses: "action:set", with: {{n: 1}}}}
    - {{id: b, uses: "action:set", needs: [a], with: {{n: 2}}}}
    - {{id: c, uses: "action:set", needs: [a], with: {{n: 3}}}}
    - {{id: d, uses: "action:set", needs: [b, c], with: {{n: 4}}}}
"""

GATED = """apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: gated}
spec:
  policy: {approval: mutations, nonInteractive: pause, writableRoots: [out]}
  actions:
    set: {kind: builtin.assign}
    save: {kind: builtin.write}
  tasks:
    - {id: a, uses: "action:set", with: {n: 1}}
    - {id: publish, uses: "action:save", needs: [a], with: {path: out/x.txt, content: x}}
"""


def build(root: Path, runs: int, executed_every: int) -> Path:
    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
    from agentctl.ids import IdGenerator, SystemClock
    from agentctl.store.engine import open_store

    os.environ["AGENTCTL_SQLITE_SYNCHRONOUS"] = "NORMAL"
    texts = {"nightly": OK.format(name="nightly"), "review": OK.format(name="review")}
    texts["gated"] = GATED
    prepared = {}
    for name, text in texts.items():
        (root / f"{name}.yaml").write_text(text)
        prepared[name] = prepare_run(str(root / f"{name}.yaml"))
    names = list(prepared)
    db = root / "runtime.db"
    clock = SystemClock()
    ids = IdGenerator(clock)
    options = ExecutionOptions(cancel_poll_seconds=3600)
    with open_store(str(db)) as store:
        for i in range(runs):
            executed = i % executed_every == 0
            name = ("nightly", "gated")[(i // executed_every) % 2] if executed else names[i % 3]
            run_id = create_run(store, prepared[name], clock=clock, ids=ids)
            if executed:
                outcome = asyncio.run(
                    RunExecutor(store, run_id, clock=clock, options=options).execute()
                )
                assert outcome.state == ("succeeded" if name == "nightly" else "paused")
    os.environ.pop("AGENTCTL_SQLITE_SYNCHRONOUS")
    return db


def measure(db: Path, repeat: int) -> list[dict[str, Any]]:
    from starlette.testclient import TestClient

    from agentctl.store.engine import open_store
    from agentctl.web import DashboardConfig, create_app

    results = []
    with open_store(str(db), create=False) as store:
        app = create_app(DashboardConfig(store=store, token="bench", adopt=False))
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            assert client.get("/?token=bench").status_code == 200
            first = client.get("/").text
            some_id = first.split('href="/runs/')[1].split('"')[0]
            # The fifth page: follow "older runs" four times.
            url = "/"
            for _ in range(4):
                page = client.get(url).text
                url = page.split('id="older" href="')[1].split('"')[0].replace("&amp;", "&")
            pages = {
                "first page (100 newest)": "/",
                "state=succeeded": "/?state=succeeded",
                "workflow=review": "/?workflow=review",
                "id search": f"/?q={some_id[-12:]}",
                "fifth page (before=)": url,
            }
            for label, path in pages.items():
                response = client.get(path)  # warm-up
                assert response.status_code == 200, response.text
                rows = response.text.count('<tr class="run')
                times, cpu = [], []
                for _ in range(repeat):
                    started, used = time.perf_counter(), time.process_time()
                    response = client.get(path)
                    times.append((time.perf_counter() - started) * 1000)
                    cpu.append((time.process_time() - used) * 1000)
                    assert response.status_code == 200
                results.append(
                    {
                        "bench": "dashboard_runs_page",
                        "page": label,
                        "rows": rows,
                        "median_ms": round(statistics.median(times), 1),
                        "max_ms": round(max(times), 1),
                        "cpu_ms_median": round(statistics.median(cpu), 1),
                        "bytes": len(response.content),
                    }
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--executed-every", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--db", type=Path, help="measure this database instead of building one")
    args = parser.parse_args()
    if args.db is None:
        root = Path(tempfile.mkdtemp(prefix="agentctl-dashboard-bench-"))
        started = time.perf_counter()
        db = build(root, args.runs, args.executed_every)
        print(
            json.dumps(
                {
                    "bench": "dashboard_build",
                    "runs": args.runs,
                    "seconds": round(time.perf_counter() - started, 1),
                    "db": str(db),
                    "db_mb": round(db.stat().st_size / 1e6, 1),
                }
            ),
            flush=True,
        )
    else:
        db = args.db
    load = os.getloadavg()[0]
    for result in measure(db, args.repeat):
        print(json.dumps({**result, "loadavg_1m": round(load, 2)}), flush=True)


if __name__ == "__main__":
    main()
