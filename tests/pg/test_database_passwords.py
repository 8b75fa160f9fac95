"""A PostgreSQL password is never shown (hints, nextSteps, JSON, logs), reaches the processes
agentctl starts through their environment (never argv), and need not be in the URL at all:
PGPASSWORD, PGPASSFILE or ~/.pgpass, or a ``passfile`` parameter. The server here has a role
that must log in with its password (the session's server trusts everyone, so a masked
password would log in there and prove nothing)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg.cluster import Cluster, start_cluster
from tests.web.conftest import RELEASE, Runs

USER = "guarded"
PASSWORD = "Sup3r-s3cret-pw"


@pytest.fixture(scope="module")
def guarded() -> Iterator[Cluster]:
    cluster = start_cluster(own=True)
    try:
        cluster.password_role(USER, PASSWORD)
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture
def bare_url(guarded: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of a fresh database owned by the guarded role, without its password."""
    import psycopg

    name = f"pw_{len(list(tmp_path.parent.iterdir()))}_{time.monotonic_ns()}"
    with psycopg.connect(guarded.admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} OWNER {USER}")
    host = guarded.admin_url.split("@", 1)[1].rsplit("/", 1)[0]
    monkeypatch.setenv("AGENTCTL_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no.pgpass"))
    return f"postgresql://{USER}@{host}/{name}"


def _with_password(url: str) -> str:
    return url.replace(f"{USER}@", f"{USER}:{PASSWORD}@", 1)


def test_the_password_is_really_required(cli: Any, bare_url: str) -> None:
    refused = cli("--output", "json", "db", "migrate", "--db", bare_url)
    assert refused.exit_code == 5, refused.stdout + refused.stderr
    assert refused.error_json()["error"]["code"] == "store.unreachable"
    assert cli("db", "migrate", "--db", _with_password(bare_url)).exit_code == 0


def test_a_password_in_the_url_is_never_shown(cli: Any, bare_url: str, tmp_path: Path) -> None:
    url = _with_password(bare_url)
    runs = Runs(cli, tmp_path)
    runs.db = url  # type: ignore[assignment]
    runs.roll(RELEASE, "release")
    rolled = cli("--output", "json", "roll", runs.workspace / "release.yaml", "--db", url)
    assert rolled.exit_code == 3, rolled.stderr
    parked = rolled.json()
    run_id = parked["data"]["runId"]
    (approval,) = parked["data"]["pendingApprovals"]
    shown = [rolled.stdout + rolled.stderr]
    assert f"{USER}:***@" in str(parked["data"]["next"]), parked
    human = cli("roll", runs.workspace / "release.yaml", "--db", url)
    assert human.exit_code == 3
    for result in (
        human,
        cli("--output", "json", "inspect", run_id, "--db", url),
        cli("inspect", run_id, "--db", url),
        cli("--output", "json", "runs", "list", "--db", url),
        cli("--output", "json", "approvals", "list", "--db", url),
        cli("--output", "json", "db", "stats", "--db", url),
        cli("--output", "json", "resume", "run-nope", "--db", url),
        cli("--output", "json", "approvals", "approve", approval, "--reason", "ok", "--db", url),
    ):
        shown.append(result.stdout + result.stderr)
    everything = "\n".join(shown)
    assert PASSWORD not in everything
    assert f"{USER}:***@" in everything


def test_the_dashboard_adopts_with_the_real_url_and_keeps_logs_in_the_state_directory(
    cli: Any, bare_url: str, tmp_path: Path, dashboard_factory: Any
) -> None:
    """Before, the child `agentctl resume` got the masked URL in its argv: it could not log
    in, the run stayed parked while the approval reported success, and its log went to
    ./postgresql:/USER:PASSWORD@HOST:PORT/ui-logs/ in the working directory."""
    from tests.web.test_dashboard_app import _csrf

    url = _with_password(bare_url)
    runs = Runs(cli, tmp_path)
    runs.db = url  # type: ignore[assignment]
    parked = runs.roll(RELEASE, "release")
    (approval,) = parked["pendingApprovals"]
    client = dashboard_factory(url)
    token = _csrf(client.get("/inbox").text)
    done = client.post(
        f"/approvals/{approval}/approve",
        data={"reason": "checked", "csrf": token, "next": "/inbox"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    client.app.state.adopter.wait()
    logs = Path.cwd() / ".agentctl" / "ui-logs"
    (log,) = logs.iterdir()
    text = log.read_text()
    assert runs.inspect(parked["runId"])["run"]["state"] == "succeeded", text
    assert PASSWORD not in text
    assert [p.name for p in Path.cwd().iterdir() if p.name.startswith("postgres")] == []


def test_a_url_without_its_password_finds_it_in_pgpassword_or_a_passfile(
    cli: Any, bare_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, port = bare_url.split("@", 1)[1].split("/", 1)[0].split(":")
    entry = f"{host}:{port}:*:{USER}:{PASSWORD}\n"
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert cli("db", "migrate", "--db", bare_url).exit_code == 0
    monkeypatch.delenv("PGPASSWORD")
    passfile = tmp_path / "pgpass"
    passfile.write_text(entry)
    passfile.chmod(0o600)
    given = cli("--output", "json", "db", "stats", "--db", f"{bare_url}?passfile={passfile}")
    assert given.exit_code == 0, given.stderr
    home = tmp_path / "pghome"
    home.mkdir()
    (home / ".pgpass").write_text(entry)
    (home / ".pgpass").chmod(0o600)
    monkeypatch.delenv("PGPASSFILE")
    monkeypatch.setenv("HOME", str(home))
    found = cli("--output", "json", "db", "stats", "--db", bare_url)
    assert found.exit_code == 0, found.stderr


@pytest.fixture
def dashboard_factory() -> Iterator[Any]:
    """A TestClient over a database URL, adopting, with its logs where `agentctl ui` puts
    them (the state directory of that database)."""
    from starlette.testclient import TestClient

    from agentctl.store.engine import open_store
    from agentctl.store.location import state_directory
    from agentctl.web import DashboardConfig, create_app

    opened: list[Any] = []

    def make(url: str) -> Any:
        store = open_store(url)
        opened.append(store)
        config = DashboardConfig(
            store=store, token="tok", adopt=True, log_dir=state_directory(url) / "ui-logs"
        )
        client = TestClient(create_app(config), base_url="http://127.0.0.1:8765")
        client.__enter__()
        opened.append(client)
        assert client.get("/?token=tok").status_code == 200
        return client

    yield make
    for thing in reversed(opened):
        if hasattr(thing, "app"):
            thing.app.state.adopter.wait()
            thing.__exit__(None, None, None)
        else:
            thing.close()
