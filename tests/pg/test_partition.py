"""A network partition, not only a kill: two workers as two hosts, each in a network
namespace of its own, reaching a PostgreSQL server in a third one over veth pairs.

The test creates the namespaces, the links and their link-local addresses (169.254.71.0/30
and 169.254.72.0/30, assigned only inside the namespaces it made) and removes them all.
The worker that claims the run (A) drives it; its link is cut while a task's effect is in
flight (the process step has written its ledger line and sleeps). After A's lease, the
other worker (B; both are started with ``--recover-interrupted``) takes the run over: the
confirmed first task is reused, the effect in doubt becomes ``uncertain`` and the run
parks — never dispatched again. When the
link comes back, A's next write is refused by the fencing token: A stops and reports the
loss. The ledger (the outside world) holds each effect once.

Needs root, iproute2 (``ip netns``) and the PostgreSQL binaries: skipped without them
locally, failed under CI (``AGENTCTL_REQUIRE_POSTGRES=1``), like every PostgreSQL test.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.pg.cluster import USER, _bin_dir, require_postgres

PORT = 5432
WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: partition}
spec:
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    first:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo first >> ledger.txt"]
    second:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo second >> ledger.txt; sleep 4"]
  tasks:
    - {id: a, uses: "action:first"}
    - {id: b, uses: "action:second", needs: [a]}
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass
class Hosts:
    """The namespaces ``db``, ``h1``, ``h2`` and the server in ``db``."""

    prefix: str
    directory: Path

    def ns(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def url(self, host: str) -> str:
        address = {"db": "127.0.0.1", "h1": "169.254.71.1", "h2": "169.254.72.1"}[host]
        return f"postgresql://{USER}@{address}:{PORT}/postgres"

    def command(self, host: str, *argv: str, **env: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), "env", *(f"{k}={v}" for k, v in env.items()),
                sys.executable, "-m", "agentctl", *argv]  # fmt: skip

    def agentctl(self, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command("db", "--output", "json", *argv, "--db", self.url("db")),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )


def _setup(prefix: str, directory: Path) -> Hosts:
    hosts = Hosts(prefix, directory)
    for name in ("db", "h1", "h2"):
        _ip("netns", "add", hosts.ns(name))
        _ip("-n", hosts.ns(name), "link", "set", "lo", "up")
    for n, host in ((1, "h1"), (2, "h2")):
        db_end, host_end = f"{prefix}d{n}", f"{prefix}h{n}"
        _ip("link", "add", db_end, "type", "veth", "peer", "name", host_end)
        _ip("link", "set", db_end, "netns", hosts.ns("db"))
        _ip("link", "set", host_end, "netns", hosts.ns(host))
        _ip("-n", hosts.ns("db"), "addr", "add", f"169.254.7{n}.1/30", "dev", db_end)
        _ip("-n", hosts.ns(host), "addr", "add", f"169.254.7{n}.2/30", "dev", host_end)
        _ip("-n", hosts.ns("db"), "link", "set", db_end, "up")
        _ip("-n", hosts.ns(host), "link", "set", host_end, "up")
    bin_dir = _bin_dir()
    assert bin_dir is not None
    account = pwd.getpwnam("postgres")
    os.chown(directory, account.pw_uid, account.pw_gid)
    as_user = ["runuser", "-u", "postgres", "--"]
    data = directory / "data"
    subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust"]
        + ["--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write("host all all 169.254.0.0/16 trust\n")
    options = (
        f"-c listen_addresses=127.0.0.1,169.254.71.1,169.254.72.1 -c port={PORT} "
        f"-k {directory} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    subprocess.run(
        ["ip", "netns", "exec", hosts.ns("db"), *as_user, str(bin_dir / "pg_ctl"), "-D"]
        + [str(data), "-l", str(directory / "server.log"), "-o", options, "-w", "-t", "60"]
        + ["start"],
        check=True,
        capture_output=True,
        timeout=90,
    )
    return hosts


def _teardown(hosts: Hosts) -> None:
    bin_dir = _bin_dir()
    if bin_dir is not None and (hosts.directory / "data" / "postmaster.pid").exists():
        subprocess.run(
            ["ip", "netns", "exec", hosts.ns("db"), "runuser", "-u", "postgres", "--"]
            + [str(bin_dir / "pg_ctl"), "-D", str(hosts.directory / "data"), "-m"]
            + ["immediate", "stop"],
            capture_output=True,
            check=False,
            timeout=60,
        )
    for name in ("db", "h1", "h2"):  # a namespace's veth ends go with it
        subprocess.run(["ip", "netns", "del", hosts.ns(name)], capture_output=True, check=False)
    shutil.rmtree(hosts.directory, ignore_errors=True)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        require_postgres("the partition test needs root and iproute2 (`ip netns`)")
    bin_dir = _bin_dir()
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        require_postgres("no initdb/pg_ctl found (apt-get install -y postgresql)")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        require_postgres("running as root and there is no 'postgres' user to run initdb")
    prefix = f"ac{os.getpid() % 100000}"
    directory = Path(tempfile.mkdtemp(prefix="agentctl-netns-"))
    try:
        made = _setup(prefix, directory)
    except (subprocess.CalledProcessError, OSError) as exc:
        _teardown(Hosts(prefix, directory))
        detail = getattr(exc, "stderr", b"") or b""
        require_postgres(f"cannot make network namespaces: {exc} {detail!r}")
    try:
        yield made
    finally:
        _teardown(made)


class Worker:
    def __init__(self, hosts: Hosts, host: str, name: str, cwd: Path, *flags: str) -> None:
        env = {
            "AGENTCTL_LEASE_SECONDS": "2",
            # Two hosts: the lease, not the pid, decides whether an owner is gone.
            "AGENTCTL_TEST_HOSTNAME": f"host-{name}",
            "AGENTCTL_ARTIFACT_ROOT": str(cwd / "artifacts"),
        }
        argv = ["--output", "jsonl", "worker", "--name", name, "--concurrency", "2", *flags]
        with (cwd / f"worker-{name}.err").open("w") as errors:
            self.process = subprocess.Popen(
                hosts.command(host, *argv, "--db", hosts.url(host), **env),
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.append(json.loads(line)["data"])

    def seen(self, wanted: Any) -> dict[str, Any] | None:
        return next((event for event in list(self.events) if wanted(event)), None)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return found


@pytest.mark.slow
def test_a_partitioned_driver_is_fenced_and_no_effect_runs_twice(
    hosts: Hosts, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(WORKFLOW)
    ledger = ws / "ledger.txt"
    migrated = hosts.agentctl("db", "migrate", cwd=ws)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    # One worker per host; whichever claims the run drives it and is cut off, the other
    # (it cannot take the run while the driver's lease is live) takes it over after.
    workers = {
        host: Worker(hosts, host, host, ws, "--recover-interrupted") for host in ("h1", "h2")
    }
    try:
        for worker in workers.values():
            _until(lambda w=worker: w.seen(lambda e: e.get("state") == "ready"), 60, "ready")
        queued = hosts.agentctl("roll", "wf.yaml", "--detach", "--workspace", str(ws), cwd=ws)
        assert queued.returncode == 0, queued.stdout + queued.stderr
        run_id = json.loads(queued.stdout)["data"]["runId"]

        def claimed_by() -> str | None:
            for host, worker in workers.items():
                if worker.seen(lambda e: e.get("runId") == run_id and e.get("state") == "claimed"):
                    return host
            return None

        driver = _until(claimed_by, 60, "a claim of the run")
        other = "h2" if driver == "h1" else "h1"
        # The second step's line is written: its effect is in flight. Cut the driver off.
        _until(lambda: ledger.exists() and "second" in ledger.read_text(), 60, "the 2nd step")
        link = f"{hosts.prefix}h{driver[-1]}"
        _ip("-n", hosts.ns(driver), "link", "set", link, "down")
        waited = hosts.agentctl("runs", "wait", run_id, cwd=ws)
        assert waited.returncode == 3, waited.stdout + waited.stderr  # parked, not guessed
        _ip("-n", hosts.ns(driver), "link", "set", link, "up")
        lost = _until(
            lambda: workers[driver].seen(
                lambda e: e.get("runId") == run_id and e.get("state") == "error"
            ),
            90,
            "the cut-off driver's report",
        )
        assert lost["code"] == "run.ownership_lost", lost
    finally:
        for worker in workers.values():
            worker.stop()
    assert ledger.read_text().split() == ["first", "second"]  # each effect exactly once
    shown = json.loads(hosts.agentctl("inspect", run_id, cwd=ws).stdout)["data"]
    status = {e["taskId"]: e["status"] for e in shown["effects"]}
    assert status == {"a": "succeeded", "b": "uncertain"}, status
    events = json.loads(hosts.agentctl("audit", run_id, cwd=ws).stdout)["data"]["events"]
    taken = [e for e in events if e["kind"] == "run.taken_over"]
    assert taken and taken[-1]["payload"]["worker"] == other
    assert hosts.agentctl("audit", run_id, "--verify", cwd=ws).returncode == 0
