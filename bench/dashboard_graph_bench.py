"""The run page of a 1,000-task foreach in Chromium (goal: drawn in under a second).

Executes the fan-out workflow of fanout_bench (``--items`` children and the join that reads
them) into a fresh SQLite file, starts ``agentctl ui`` on it as a real process, and opens
the run's page in headless Chromium (Debian's ``/usr/bin/chromium`` driven by Playwright).
Reported per sample, then as median and slowest of ``--repeat``:

- ``server_ms``: the run page's HTML, fetched by the browser's own request context;
- ``page_ms``: from navigation to the task graph drawn by dagre (its group folded, as the
  page starts it) and the timeline present, measured with the page's clock;
- ``expand_ms``: opening the group in the graph (dagre lays out every child).

On a loaded machine wall times say little, so each sample also has CPU times: the ``ui``
process's user+system time for the page's HTML (``server_cpu_ms``, from /proc), and the
renderer's main-thread task time (Chrome DevTools ``Performance.getMetrics``
``TaskDuration``, counted from the navigation) for loading and drawing the page
(``page_task_ms``) and for expanding
the group (``expand_task_ms``).

    .venv/bin/python bench/dashboard_graph_bench.py --items 1000 --repeat 5
    .venv/bin/python bench/dashboard_graph_bench.py --db RUNS.db --run RUN_ID  # measure again
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import _execute, _workspace  # noqa: E402
from fanout_bench import raised  # noqa: E402

from agentctl.engine.run.creation import create_run, prepare_run  # noqa: E402
from agentctl.ids import IdGenerator, SystemClock  # noqa: E402
from agentctl.store.engine import open_store  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARGS += ["--disable-component-update", "--disable-sync", "--no-first-run"]


def build(items: int) -> tuple[Path, str]:
    wf, db = _workspace(raised(items))
    store = open_store(str(db))
    clock = SystemClock()
    run_id = create_run(store, prepare_run(str(wf)), clock=clock, ids=IdGenerator(clock))
    outcome = _execute(store, run_id)
    store.close()
    assert outcome.state == "succeeded", outcome.error
    return db, run_id


def _cpu_ms(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far, in milliseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _task_ms(cdp: Any) -> float:
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration")) * 1000


def measure(db: Path, run_id: str, repeat: int) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    ui = subprocess.Popen(
        [sys.executable, "-m", "agentctl", "--output", "jsonl", "ui", "--db", str(db)]
        + ["--port", "0", "--no-adopt"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert ui.stdout is not None
    url = json.loads(ui.stdout.readline())["data"]["url"]
    base = url.split("?")[0].rstrip("/")
    samples = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(url)
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            for index in range(repeat + 1):
                cpu = _cpu_ms(ui.pid)
                started = time.perf_counter()
                html = context.request.get(f"{base}/runs/{run_id}").text()
                server_ms = (time.perf_counter() - started) * 1000
                server_cpu_ms = _cpu_ms(ui.pid) - cpu
                page.goto(f"{base}/runs/{run_id}")
                page.locator("#graph svg g.gnode[data-id='join']").wait_for()
                page.locator("#timeline .tl-row").first.wait_for()
                page_ms = page.evaluate("performance.now()")
                # A navigation starts the renderer's counters again: this is the new page's.
                page_task_ms = _task_ms(cdp)
                tasks = _task_ms(cdp)
                expand = page.evaluate(
                    """() => {
                      const t = performance.now();
                      document.querySelector("#graph g.gnode[data-id='unit'] .gexpand")
                        .dispatchEvent(new MouseEvent("click", {bubbles: true}));
                      return performance.now() - t;
                    }"""
                )
                expand_task_ms = _task_ms(cdp) - tasks
                nodes = page.locator("#graph svg g.gnode").count()
                window = page.evaluate("window.agentctlGraph.collapsed")
                page.evaluate("k => { for (const g in k) delete k[g]; }", window)
                if index == 0:
                    continue  # warm-up
                samples.append(
                    {
                        "server_ms": round(server_ms, 1),
                        "server_cpu_ms": round(server_cpu_ms, 1),
                        "page_ms": round(page_ms, 1),
                        "page_task_ms": round(page_task_ms, 1),
                        "expand_ms": round(expand, 1),
                        "expand_task_ms": round(expand_task_ms, 1),
                        "nodes_expanded": nodes,
                        "html_bytes": len(html.encode()),
                    }
                )
            browser.close()
    finally:
        ui.terminate()
        ui.wait()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", type=Path, help="measure this database again (with --run)")
    parser.add_argument("--run", help="the run of --db to open")
    options = parser.parse_args()
    if options.db is not None and options.run:
        db, run_id = options.db, options.run
    else:
        db, run_id = build(options.items)
        print(json.dumps({"db": str(db), "run": run_id}), file=sys.stderr, flush=True)
    samples = measure(db, run_id, options.repeat)
    summary: dict[str, Any] = {"bench": "dashboard_run_page", "items": options.items}
    keys = ("server_ms", "server_cpu_ms", "page_ms", "page_task_ms", "expand_ms")
    for key in (*keys, "expand_task_ms"):
        values = [s[key] for s in samples]
        summary[f"{key}_median"] = round(statistics.median(values), 1)
        summary[f"{key}_max"] = max(values)
    summary["nodes_expanded"] = samples[-1]["nodes_expanded"]
    summary["html_bytes"] = samples[-1]["html_bytes"]
    summary["loadavg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
