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
- ``scale_400x50ms``: 400 tasks that each wait 50 ms on I/O and a join,
  ``maxConcurrency: 64``, with N workers of ``--concurrency C`` (8 by default);
  throughput = 400 / wall, and the claim latency (a task published ready → claimed by a
  worker) median and p99 from the workers' events. Two variants (``--variant``):
  ``sleep``, a ``builtin.shell.exec`` of ``sleep 0.05`` (a process spawn per task), and
  ``http``, an agent step whose model is an OpenAI Chat Completions endpoint on
  127.0.0.1, served by this script, that answers after 50 ms (one loopback HTTP call per
  task; agentctl has no plain HTTP action kind, and a model call is the HTTP step its
  workflows make). Each line also gives the CPU time per task of the workers (with their
  child processes), of the database server (when this script started it) and of this
  process (which serves the HTTP variant's endpoint).

``--probe`` also samples the server's backends every 5 ms during each scaling run
(``pg_stat_activity`` and ``pg_locks``): how many waited for a lock, on which event, and
how often some backend held the store's write lock (an advisory lock). Each scaling line
gives the CPU of the workers' ``sleep`` children apart, and, from the workers' events, a
claimed task's time from claim to outcome recorded (``task_ms``) and of recording the
outcome (``finish_ms``). ``--max-concurrency`` changes the workflow's
``runtime.maxConcurrency`` (the driver's batch size, 64 by default). ``--runs K`` splits
the 400 tasks over K runs of 400/K tasks executed at the same time (independent runs:
with per-run locks their writes do not wait for each other); the probe then also says how
often the store lock was held exclusively and how many backends waited on an advisory
lock. ``BENCH_PYTHONPATH``
is put in front of the workers' ``PYTHONPATH`` (a ``sitecustomize`` that traces
statements, say).

``--hosts N`` runs the workers as N separate hosts: each host is a network namespace of its
own (``ip netns``, iproute2; needs root), joined to the database server's namespace by a
veth pair on a bridge there, on link-local addresses this script assigns inside the
namespaces it creates (169.254.70.0/24: the server's side .1, host i .(1+i)) and removes
at the end. The script re-runs itself inside the server's namespace; workers reach the
server, and the HTTP variant's endpoint, over their links, never over loopback. Worker i
runs on host ``i mod N``. Lines carry ``"hosts": N``.

``--statements`` starts the server with ``pg_stat_statements`` and gives, per scaling
line, the statements the server executed per task (``statements_per_task``, each statement
of a multi-statement query apart, the run's creation included), the explicit transactions
(``begins_per_task``) and the most frequent statements (``statements_by_query``). psycopg
prepares a statement it sent five times, and the extension does not count a prepared
``BEGIN`` or ``COMMIT``. Before the driver sessions' pipelines (docs/postgresql.md, "The
fence with the commit") the ``BEGIN``s counted the explicit transactions; since, a driver
session sends both prepared in its pipelines, so ``begins_per_task`` counts only the
other sessions' transactions and ``statements_per_task`` leaves out every pipelined
``BEGIN`` and ``COMMIT``: compare statement counts only between checkouts of one side of
that change.

``--checkout DIR`` runs the agentctl of another checkout (its workers too), for an A/B in
one sitting against the same ``--url``::

    git worktree add --detach /tmp/pgold main
    for c in /tmp/pgold . /tmp/pgold .; do
      .venv/bin/python bench/pg_bench.py --checkout $c --url URL --skip-standard; done
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _checkout() -> Path:
    """``--checkout DIR`` (read before anything imports agentctl), else this checkout."""
    if "--checkout" in sys.argv:
        return Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
    return Path(__file__).resolve().parent.parent


CHECKOUT = _checkout()
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(CHECKOUT))

from engine_bench import chain_workflow, fanout_workflow  # noqa: E402

from agentctl.engine.core.faults import Faults  # noqa: E402
from agentctl.engine.run.creation import create_run, prepare_run  # noqa: E402
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor  # noqa: E402
from agentctl.engine.worker import detach_run, wait_for_run  # noqa: E402
from agentctl.ids import IdGenerator, SystemClock  # noqa: E402
from agentctl.store.engine import Store, open_store  # noqa: E402

PEERS_PYTHON = "/tmp/peers-venv/bin/python"

#: The store lock's key ("agentctl", 0x6167656E7463746C) as pg_locks shows an advisory
#: bigint key: (classid, objid) = (high, low) 32 bits. A constant here, so that the
#: probe reads the same on a checkout from before per-run locks (``--checkout``).
_STORE_LOCK = (0x6167656E, 0x7463746C)


#: ``--hosts``: the bridge in the server's namespace and the hosts' addresses on it.
BRIDGE_ADDRESS = "169.254.70.1"


def scale_workflow(n: int, endpoint: str | None = None, batch: int = 64) -> str:
    """``n`` 50 ms waits and a join: ``sleep 0.05`` processes, or (``endpoint``) model
    calls to a loopback Chat Completions server that answers after 50 ms."""
    if endpoint is not None:
        return f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: scale-http}}
spec:
  runtime: {{maxConcurrency: {batch}, limits: {{maxItemsPerExpansion: {max(n, 256)}}}}}
  policy: {{approval: never, networkAllowlist: [127.0.0.1, {BRIDGE_ADDRESS}]}}
  providers:
    local: {{kind: openai, endpoint: "{endpoint}"}}
  agents:
    waiter: {{provider: local, model: bench, instructions: Answer., timeoutSeconds: 30}}
  actions:
    step: {{kind: builtin.assign}}
  tasks:
    - id: unit
      uses: agent:waiter
      foreach: {{items: {list(range(n))}, maxItems: {n}}}
      with: {{prompt: wait}}
    - id: join
      uses: action:step
      needs: [unit]
      with: {{items: "${{{{ tasks.unit.output.items }}}}"}}
"""
    return f"""apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: scale}}
spec:
  runtime: {{maxConcurrency: {batch}, limits: {{maxItemsPerExpansion: {max(n, 256)}}}}}
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


_CHAT_REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "bench",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()


class SlowEndpoint:
    """A Chat Completions endpoint on 127.0.0.1 that answers every POST after ``delay``
    seconds (an asyncio server in a thread of this process: waiting costs no CPU)."""

    def __init__(self, delay: float = 0.05, host: str = "127.0.0.1") -> None:
        self.delay = delay
        self.host = host
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1/chat/completions"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._answer, self.host, 0, backlog=512)
        )
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        self._loop.run_forever()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                await asyncio.sleep(self.delay)
                self.requests += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(_CHAT_REPLY)}\r\n\r\n".encode()
                    + _CHAT_REPLY
                )
                await writer.drain()
        writer.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def _cpu_seconds(pid: int) -> float:
    """CPU time of a live process and of its children it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Hosts:
    """``--hosts N``: namespaces ``db`` and ``h1``…``hN`` (named with this process's id),
    a bridge in ``db`` holding :data:`BRIDGE_ADDRESS`, and one veth pair per host."""

    def __init__(self, count: int, prefix: str | None = None) -> None:
        self.count = count
        self.prefix = prefix or f"agb{os.getpid() % 100000}"

    def ns(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def create(self) -> None:
        for name in ("db", *(f"h{i}" for i in range(1, self.count + 1))):
            _ip("netns", "add", self.ns(name))
            _ip("-n", self.ns(name), "link", "set", "lo", "up")
        db = self.ns("db")
        _ip("-n", db, "link", "add", "br0", "type", "bridge")
        _ip("-n", db, "addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", "br0")
        _ip("-n", db, "link", "set", "br0", "up")
        for i in range(1, self.count + 1):
            db_end, host_end = f"{self.prefix}d{i}", f"{self.prefix}h{i}"
            _ip("link", "add", db_end, "type", "veth", "peer", "name", host_end)
            _ip("link", "set", db_end, "netns", db)
            _ip("link", "set", host_end, "netns", self.ns(f"h{i}"))
            _ip("-n", db, "link", "set", db_end, "master", "br0")
            _ip("-n", db, "link", "set", db_end, "up")
            _ip("-n", self.ns(f"h{i}"), "addr", "add", f"169.254.70.{1 + i}/24", "dev", host_end)
            _ip("-n", self.ns(f"h{i}"), "link", "set", host_end, "up")

    def remove(self) -> None:
        for name in ("db", *(f"h{i}" for i in range(1, self.count + 1))):
            subprocess.run(["ip", "netns", "del", self.ns(name)], capture_output=True, check=False)

    def on(self, index: int, argv: list[str]) -> list[str]:
        """``argv`` run on the host of worker ``index`` (0-based)."""
        return ["ip", "netns", "exec", self.ns(f"h{index % self.count + 1}"), *argv]


#: Set inside the server's namespace under ``--hosts``.
HOSTS: Hosts | None = None


def _own_cluster() -> Any:
    """tests/pg/cluster.py of this script's checkout (not ``--checkout``'s, which may
    predate the options this script starts its server with)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "tests" / "pg" / "cluster.py"
    spec = importlib.util.spec_from_file_location("pg_bench_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Server:
    """A database server: fresh databases at the current schema, from a template."""

    def __init__(
        self, url: str | None, directory: str | None = None, statements: bool = False
    ) -> None:
        self.cluster: Any = None
        #: ``--statements``: the server counts statements (``pg_stat_statements``).
        self.statements = statements
        #: The data directory's parent of a server started elsewhere (``--server-dir``):
        #: its CPU is measured too.
        self.directory = Path(directory) if directory else None
        if url is None:
            start_cluster = _own_cluster().start_cluster

            self.cluster = start_cluster(
                durable=True,
                listen=(BRIDGE_ADDRESS,) if HOSTS else (),
                trust="169.254.70.0/24" if HOSTS else None,
                preload=("pg_stat_statements",) if statements else (),
            )
            url = self.cluster.admin_url
        self.admin_url = url
        self.template = self._create("bench_template")
        open_store(self.url(self.template)).close()
        if statements:
            import psycopg

            with psycopg.connect(self.url(self.template), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self._n = 0

    def url(self, name: str) -> str:
        return f"{self.admin_url.rpartition('/')[0]}/{name}"

    def remote(self, url: str) -> str:
        """``url`` as a worker on another host reaches it (``--hosts``: over its link)."""
        return url.replace("@127.0.0.1:", f"@{BRIDGE_ADDRESS}:") if HOSTS else url

    def _create(self, name: str, template: str | None = None) -> str:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return name

    def fresh(self) -> str:
        self._n += 1
        return self.url(self._create(f"bench_{os.getpid()}_{self._n}", self.template))

    def cpu_seconds(self) -> float | None:
        """CPU time of the server this script started (its processes, live and ended)."""
        directory = self.directory or (self.cluster.directory if self.cluster else None)
        if directory is None:
            return None
        pid = int((directory / "data" / "postmaster.pid").read_text().split()[0])
        total = _cpu_seconds(pid)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()


class Worker:
    """An ``agentctl worker`` process; its events are collected by a thread."""

    def __init__(self, url: str, ws: Path, name: str, concurrency: int, index: int = 0) -> None:
        argv = [sys.executable, "-m", "agentctl", "--output", "jsonl", "worker", "--name", name]
        argv += ["--concurrency", str(concurrency), "--db", url]
        self.process = subprocess.Popen(
            HOSTS.on(index, argv) if HOSTS else argv,
            cwd=ws,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={
                **{k: v for k, v in os.environ.items() if k != "AGENTCTL_FAULT"},
                "PYTHONPATH": os.pathsep.join(
                    [*filter(None, [os.environ.get("BENCH_PYTHONPATH")]), str(CHECKOUT)]
                ),
            },
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


class ActivitySampler:
    """Samples the server's backends while a run executes (``--probe``): how often a
    backend of the benchmark's database was waiting, and on what (``pg_stat_activity``'s
    ``wait_event_type:wait_event``; ``Lock:advisory`` is the store's write lock), and how
    many were executing a statement. One sample every ``every`` seconds, from a thread
    with its own connection (its queries are left out of the figures)."""

    def __init__(self, url: str, every: float = 0.005) -> None:
        self.url = url
        self.every = every
        self.samples = 0
        self.waits: dict[str, int] = {}
        self.active = 0
        self.lock_waiters = 0
        self.idle_in_transaction = 0
        self.write_lock_held = 0
        self.store_lock_exclusive = 0
        self.advisory_waits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ActivitySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _sample(self) -> None:
        import psycopg

        database = self.url.rpartition("/")[2]
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(self.every):
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event, EXISTS (SELECT 1 FROM pg_locks l "
                    "WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted), "
                    "EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted "
                    "AND l.locktype = 'advisory' AND l.mode = 'ExclusiveLock' "
                    "AND l.classid::bigint = %s AND l.objid::bigint = %s) "
                    "FROM pg_stat_activity a WHERE datname = %s AND pid <> pg_backend_pid()",
                    (*_STORE_LOCK, database),
                ).fetchall()
                self.samples += 1
                self.write_lock_held += any(row[3] for row in rows)
                self.store_lock_exclusive += any(row[4] for row in rows)
                self.advisory_waits += sum(row[2] == "advisory" for row in rows)
                self.idle_in_transaction += sum(row[0] == "idle in transaction" for row in rows)
                for state, kind, event, _, _ in rows:
                    if state == "active":
                        self.active += 1
                        if kind is not None:
                            key = f"{kind}:{event}"
                            self.waits[key] = self.waits.get(key, 0) + 1
                            if kind == "Lock":
                                self.lock_waiters += 1

    def summary(self) -> dict[str, Any]:
        n = max(self.samples, 1)
        top = sorted(self.waits.items(), key=lambda kv: -kv[1])[:6]
        return {
            "samples": self.samples,
            "active_backends_avg": round(self.active / n, 2),
            "lock_waiting_backends_avg": round(self.lock_waiters / n, 2),
            # How often some backend held an advisory lock (a run's or the store's; before
            # per-run locks, the store's one write lock), how often one held the store
            # lock exclusively, how many backends waited on an advisory lock per sample,
            # and how many sat in a transaction waiting for their client.
            "write_lock_held_fraction": round(self.write_lock_held / n, 3),
            "store_lock_exclusive_fraction": round(self.store_lock_exclusive / n, 3),
            "advisory_waiting_backends_avg": round(self.advisory_waits / n, 3),
            "idle_in_transaction_avg": round(self.idle_in_transaction / n, 2),
            "waits_per_sample": {k: round(v / n, 3) for k, v in top},
        }


class StatementCounter:
    """``--statements``: what the server executed in one database while a run did, from
    ``pg_stat_statements`` (reset at the start; each statement of a multi-statement query
    counts apart, ``BEGIN`` and ``COMMIT`` included; the probe's and this counter's own
    queries left out). Includes the run's creation and the benchmark's wait for it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.summary: dict[str, Any] | None = None

    def _query(self, sql: str) -> list[Any]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql).fetchall()

    def __enter__(self) -> StatementCounter:
        self._query("SELECT pg_stat_statements_reset()")
        return self

    def __exit__(self, *exc: object) -> None:
        found = self._query(
            "SELECT query, calls FROM pg_stat_statements WHERE dbid = (SELECT oid FROM "
            "pg_database WHERE datname = current_database()) AND query NOT LIKE "
            "'%pg_stat_%' ORDER BY calls DESC"
        )
        self.summary = {
            "statements": sum(int(calls) for _, calls in found),
            "begins": sum(int(c) for q, c in found if q.strip().upper().startswith("BEGIN")),
            "by_query": [(" ".join(str(q).split())[:160], int(c)) for q, c in found[:60]],
        }


def _workspace(text: str) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="agentctl-pgbench-", dir=os.environ.get("BENCH_TMP")))
    (ws / "wf.yaml").write_text(text)
    return ws


@dataclass
class Measured:
    wall: float
    pool: list[Worker]
    #: CPU seconds while the run executed: the workers (and their children), the
    #: database server (None when not started here), this process.
    workers_cpu: float = 0.0
    server_cpu: float | None = None
    driver_cpu: float = 0.0
    #: Of ``workers_cpu``, what the workers' child processes (``sleep``) took.
    children_cpu: float = 0.0
    activity: dict[str, Any] | None = None
    statements: dict[str, Any] | None = None


def _children_cpu(pid: int) -> float:
    """CPU time of the children a live process has waited for (``sleep`` processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[13:15]) / os.sysconf("SC_CLK_TCK")


def with_workers(
    server: Server, text: str, workers: int, concurrency: int, probe: bool = False, runs: int = 1
) -> Measured:
    """Run the workflow by ``workers`` worker processes (``probe``: sample the backends);
    ``runs`` runs of it at once (the clock stops when the last one is done)."""
    ws = _workspace(text)
    url = server.fresh()
    prepared = prepare_run(str(ws / "wf.yaml"), workspace=str(ws))
    remote = server.remote(url)
    pool = [Worker(remote, ws, f"w{i + 1}", concurrency, i) for i in range(workers)]
    for worker in pool:
        worker.ready.wait(120)
    store = open_store(url)
    clock = SystemClock()
    try:
        server_before = server.cpu_seconds()
        workers_before = sum(_cpu_seconds(w.process.pid) for w in pool)
        children_before = sum(_children_cpu(w.process.pid) for w in pool)
        driver_before = _own_cpu()
        sampler = ActivitySampler(url) if probe else contextlib.nullcontext()
        counter = StatementCounter(url) if server.statements else contextlib.nullcontext()
        with counter, sampler:
            started = time.perf_counter()
            run_ids = [
                create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
                for _ in range(runs)
            ]
            for run_id in run_ids:
                detach_run(store, run_id)

            async def wait_all() -> list[str]:
                return list(await asyncio.gather(*(wait_for_run(store, r) for r in run_ids)))

            states = asyncio.run(wait_all())
            wall = time.perf_counter() - started
        driver_cpu = _own_cpu() - driver_before
        workers_cpu = sum(_cpu_seconds(w.process.pid) for w in pool) - workers_before
        children_cpu = sum(_children_cpu(w.process.pid) for w in pool) - children_before
        server_after = server.cpu_seconds()
        assert set(states) == {"succeeded"}, states
    finally:
        for worker in pool:
            worker.stop()
        store.close()
    return Measured(
        wall,
        pool,
        workers_cpu,
        None if server_before is None or server_after is None else server_after - server_before,
        driver_cpu,
        children_cpu,
        sampler.summary() if isinstance(sampler, ActivitySampler) else None,
        counter.summary if isinstance(counter, StatementCounter) else None,
    )


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
        wall = with_workers(server, text, 1, 8).wall
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


def _quantiles(values: list[float]) -> dict[str, float | None]:
    values = sorted(values)
    if not values:
        return {"median": None, "p99": None}
    return {
        "median": round(statistics.median(values), 1),
        "p99": round(values[min(len(values) - 1, int(len(values) * 0.99))], 1),
    }


def scaling(
    server: Server,
    counts: list[int],
    variant: str,
    concurrency: int = 8,
    n: int = 400,
    probe: bool = False,
    batch: int = 64,
    runs: int = 1,
) -> list[dict[str, Any]]:
    out = []
    endpoint = (
        SlowEndpoint(host=BRIDGE_ADDRESS if HOSTS else "127.0.0.1") if variant == "http" else None
    )
    try:
        text = scale_workflow(n // runs, None if endpoint is None else endpoint.url, batch)
        for workers in counts:
            measured = with_workers(server, text, workers, concurrency, probe, runs)
            pool = measured.pool
            done = [e for w in pool for e in w.events if e.get("state") == "task.done"]
            waited = sorted(
                float(e["waitedMs"])
                for w in pool
                for e in w.events
                if e.get("state") == "task.claimed"
            )
            by_worker = [sum(1 for e in w.events if e.get("state") == "task.claimed") for w in pool]
            out.append(
                {
                    "bench": "agentctl-postgresql",
                    "workload": f"scale_{n}x50ms_{variant}" + (f"_{runs}runs" if runs > 1 else ""),
                    "durability": f"workers={workers}",
                    "checkout": str(CHECKOUT),
                    "runs": runs,
                    "hosts": HOSTS.count if HOSTS else 1,
                    "workers": workers,
                    "concurrency_per_worker": concurrency,
                    "max_concurrency": batch,
                    "wall_s": round(measured.wall, 4),
                    "steps_per_s": round(n / measured.wall, 1),
                    "claim_ms_median": round(statistics.median(waited), 1) if waited else None,
                    "claim_ms_p99": round(waited[min(len(waited) - 1, int(len(waited) * 0.99))], 1)
                    if waited
                    else None,
                    "claims": len(waited),
                    "claims_by_worker": by_worker,
                    "cpu_ms_per_task_workers": round(measured.workers_cpu * 1000 / n, 2),
                    "cpu_ms_per_task_server": None
                    if measured.server_cpu is None
                    else round(measured.server_cpu * 1000 / n, 2),
                    "cpu_ms_per_task_bench": round(measured.driver_cpu * 1000 / n, 2),
                    "cpu_ms_per_task_children": round(measured.children_cpu * 1000 / n, 2),
                    # A claimed task's time in the worker (claim to outcome recorded), and
                    # of it, recording the outcome (the I/O is done by then).
                    "task_ms": _quantiles([float(e["taskMs"]) for e in done if "taskMs" in e]),
                    "finish_ms": _quantiles(
                        [float(e["finishMs"]) for e in done if "finishMs" in e]
                    ),
                    **({"activity": measured.activity} if measured.activity else {}),
                    **(
                        {
                            "statements_per_task": round(measured.statements["statements"] / n, 2),
                            "begins_per_task": round(measured.statements["begins"] / n, 2),
                            "statements_by_query": measured.statements["by_query"],
                        }
                        if measured.statements
                        else {}
                    ),
                    "load_avg_1m": _load(),
                }
            )
    finally:
        if endpoint is not None:
            endpoint.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a server whose user may create databases")
    parser.add_argument(
        "--server-dir",
        help="with --url: the directory holding that server's data/ (its CPU is measured)",
    )
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--skip-standard", action="store_true")
    parser.add_argument("--dbos", action="store_true", help="also run DBOS on the same server")
    parser.add_argument(
        "--variant", choices=["sleep", "http", "both"], default="both", help="the 50 ms wait"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="per worker")
    parser.add_argument("--checkout", help="run the agentctl of this checkout (A/B)")
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=64,
        help="the workflow's runtime.maxConcurrency (the driver's batch size)",
    )
    parser.add_argument(
        "--probe", action="store_true", help="sample the server's backends (waits, locks)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="split the 400 tasks over this many runs executed at once (independent runs)",
    )
    parser.add_argument(
        "--hosts",
        type=int,
        default=1,
        help="run the workers as this many hosts (network namespaces; needs root)",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="count the statements the server executed per task (pg_stat_statements)",
    )
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hosts > 1 and args.inside is None:
        if args.url:
            parser.error("--hosts starts its own server inside the namespaces; drop --url")
        if os.geteuid() != 0 or shutil.which("ip") is None:
            parser.error("--hosts needs root and iproute2 (`ip netns`)")
        hosts = Hosts(args.hosts)
        try:
            hosts.create()
            again = ["ip", "netns", "exec", hosts.ns("db"), sys.executable, *sys.argv]
            sys.exit(subprocess.run([*again, "--inside", hosts.prefix], check=False).returncode)
        finally:
            hosts.remove()
    if args.inside is not None:
        global HOSTS
        HOSTS = Hosts(args.hosts, args.inside)
        # The endpoint is no longer on loopback, where a provider needs no credential.
        os.environ.setdefault("OPENAI_API_KEY", "bench-key-not-secret")
    server = Server(args.url, args.server_dir, args.statements)
    try:
        lines = [] if args.skip_standard else standard(server)
        for line in lines:
            print(json.dumps(line), flush=True)
        if args.dbos:
            dbos_url = server.url(server._create(f"bench_dbos_{os.getpid()}"))
            script = Path(__file__).with_name("pg_dbos_bench.py")
            subprocess.run([PEERS_PYTHON, str(script), dbos_url], check=True, timeout=600)
        for variant in ("sleep", "http") if args.variant == "both" else (args.variant,):
            for line in scaling(
                server,
                args.workers,
                variant,
                args.concurrency,
                probe=args.probe,
                batch=args.max_concurrency,
                runs=args.runs,
            ):
                print(json.dumps(line), flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    main()
