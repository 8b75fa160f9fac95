"""PostgreSQL errors are classified by SQLSTATE, never by their English wording: on a server
that words its messages in German (another ``lc_messages``), a serialization failure or a
lock timeout is still the transient ``store.locked`` and a connection the server ended or
lost is still the transient ``store.unreachable``. The server here is the module's own, so
the restart tests can restart it without disturbing the session's."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentctl.errors import PersistenceError
from agentctl.store.engine import open_store
from agentctl.store.errors import driver_error
from tests.pg.backends import rows
from tests.pg.cluster import Cluster, start_cluster


@pytest.fixture(scope="module")
def german() -> Iterator[Cluster]:
    # Durable: `pg_ctl restart -m immediate` is a crash, and with synchronous_commit off
    # the server would forget the last commits across it, as it is allowed to.
    cluster = start_cluster(language="de", own=True, durable=True)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture
def german_url(german: Cluster) -> str:
    url = german.create_database("de")
    open_store(url).close()
    return url


def _raised(work: Any) -> BaseException:
    try:
        work()
    except BaseException as exc:  # noqa: BLE001 - the driver's own error is what is tested
        return exc
    raise AssertionError("nothing was raised")


def test_the_server_really_speaks_german(german: Cluster) -> None:
    """The precondition of every test here: the messages are not English."""
    import psycopg

    with psycopg.connect(german.admin_url, autocommit=True) as conn:
        error = _raised(lambda: conn.execute("SELECT 1/0"))
    assert getattr(error, "sqlstate", None) == "22012"
    assert "division by zero" not in str(error) and "Null" in str(error), str(error)


def test_a_serialization_failure_is_transient_whatever_the_language(german_url: str) -> None:
    import psycopg

    with psycopg.connect(german_url) as first, psycopg.connect(german_url) as second:
        first.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        first.execute("INSERT INTO t VALUES (1, 0)")
        first.commit()
        first.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        first.execute("SELECT v FROM t WHERE id = 1").fetchall()
        second.execute("UPDATE t SET v = 1 WHERE id = 1")
        second.commit()
        error = _raised(lambda: first.execute("UPDATE t SET v = 2 WHERE id = 1"))
    assert getattr(error, "sqlstate", None) == "40001"
    assert "could not serialize" not in str(error)
    found = driver_error("db", error)
    assert found.code == "store.locked" and "40001" in found.message


def test_a_lock_timeout_is_store_locked_through_the_store(
    german_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from agentctl.store.locks import STORE_KEY as WRITE_LOCK_KEY

    monkeypatch.setenv("AGENTCTL_SQLITE_BUSY_TIMEOUT_MS", "200")
    store = open_store(german_url)
    try:
        with psycopg.connect(german_url) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))

            def write() -> None:
                with store.write() as conn:
                    conn.exec_driver_sql("SELECT 1")

            error = _raised(write)
    finally:
        store.close()
    assert isinstance(error, PersistenceError) and error.code == "store.locked", error
    assert "55P03" in error.message and "lock timeout" not in error.message


def test_a_connection_the_server_ends_is_store_unreachable(german_url: str) -> None:
    """pg_terminate_backend is what a fast shutdown does to every session (57P01); the
    next use of the dead connection fails in psycopg itself, without any SQLSTATE."""
    import psycopg

    store = open_store(german_url)
    try:
        with store.driver_session() as session:
            pid = session.exec_driver_sql("SELECT pg_backend_pid()").first()[0]
            with psycopg.connect(german_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            ended = _raised(lambda: session.exec_driver_sql("SELECT 1"))
            closed = _raised(lambda: session.exec_driver_sql("SELECT 1"))
    finally:
        store.close()
    assert isinstance(ended, PersistenceError), ended
    assert ended.code == "store.unreachable" and "57P01" in ended.message, ended.message
    assert "terminating connection" not in ended.message
    assert isinstance(closed, PersistenceError) and closed.code == "store.unreachable", closed


def test_connection_classes_and_states_by_code() -> None:
    """Every SQLSTATE the table names, made as the driver makes them."""
    from psycopg import errors

    cases = {
        "08006": "store.unreachable",
        "08001": "store.unreachable",
        "57P01": "store.unreachable",
        "57P02": "store.unreachable",
        "57P03": "store.unreachable",
        "28P01": "store.unreachable",
        "40001": "store.locked",
        "40P01": "store.locked",
        "55P03": "store.locked",
        "53100": "store.disk_full",
        "53300": "store.unreachable",
        "58030": "store.io_error",
        "25006": "store.read_only",
        "42P01": "store.database_error",
        "23505": "store.constraint",
        "23503": "store.constraint",
        "23514": "store.constraint",
    }
    for state, code in cases.items():
        error = errors.lookup(state)("Meldung in einer anderen Sprache")
        assert error.sqlstate == state
        assert driver_error("db", error).code == code, state


SLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: slow}
spec:
  inputs: {tag: none}
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    # Each execution leaves one unique file (counting them counts executions), then takes
    # long enough for the server to restart under it.
    mark:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "mkdir -p ledger.d && mktemp ledger.d/run.XXXXXX > /dev/null && sleep 2"]
    save: {kind: builtin.write}
  tasks:
    - {id: mark, uses: "action:mark"}
    - id: report
      uses: action:save
      needs: [mark]
      with: {path: "out/${{ inputs.tag }}.txt", content: "${{ inputs.tag }}"}
"""


def _settled(url: str, run_id: str) -> str:
    """The run's state once it is finished or parked, read as a second machine would
    (again while the restarted server is not answering yet)."""
    import psycopg

    deadline = time.monotonic() + 90
    state = "unknown"
    while time.monotonic() < deadline:
        try:
            (state,) = rows(url, "SELECT status FROM runs WHERE id = ?", (run_id,))[0]
        except psycopg.OperationalError:
            pass
        if state in ("succeeded", "failed", "cancelled", "paused"):
            break
        time.sleep(0.2)
    return str(state)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_server_restart_during_runs_leaves_no_run_held(
    cli: Any, german: Cluster, german_url: str, tmp_path: Path, mode: str
) -> None:
    """Restarted while two runs' effects are in flight: the worker survives (an idle
    worker once exited 5), every run is finished by the workers without restarting them,
    no effect runs twice, and no run is left owned by a live worker that no longer drives
    it (where `resume` was refused and `cancel` did nothing)."""
    from tests.pg.test_workers import _ready, _worker

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(SLOW)
    worker = _worker(german_url, ws, "w1", AGENTCTL_STORE_RETRY_SECONDS="60")
    try:
        _ready(worker)
        run_ids = []
        for tag in ("a", "b"):
            queued = cli(
                "--output", "json", "roll", ws / "wf.yaml", "--detach", "--input", f"tag={tag}",
                "--workspace", ws, "--db", german_url,
            )  # fmt: skip
            assert queued.exit_code == 0, queued.stdout + queued.stderr
            run_ids.append(queued.json()["data"]["runId"])
        deadline = time.monotonic() + 60
        while _executions(ws) < 2:
            assert time.monotonic() < deadline, "the effects never started"
            time.sleep(0.05)
        german.restart(mode)
        states = [_settled(german_url, run_id) for run_id in run_ids]
        assert worker.poll() is None, worker.communicate()
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=120)
        events = f"{out}\n{err}"
    assert worker.returncode == 0, events
    for run_id, state in zip(run_ids, states, strict=True):
        if state != "succeeded":
            # An effect whose outcome the restart made unknowable parks as uncertain for an
            # operator: never executed again. The run is not held by anyone.
            shown = cli("--output", "json", "inspect", run_id, "--db", german_url)
            assert state == "paused", f"{state}: {shown.stdout} {events}"
    assert _executions(ws) == 2, events
    assert rows(german_url, "SELECT COUNT(*) FROM runs WHERE owner_id IS NOT NULL") == [(0,)]


def _executions(ws: Path) -> int:
    return len(list((ws / "ledger.d").glob("run.*")))
