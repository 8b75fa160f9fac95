"""Shared fixtures: every test runs with its own home, database and working directory."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from agentctl import hints
from agentctl.cli import main as cli_main
from agentctl.cli import output
from tests.pg.cluster import Cluster, start_cluster

# Machines here are shared and noisy: a property test must fail on a wrong answer, never on
# a slow example, so no per-example deadline (and no health check on slow data generation).
settings.register_profile("agentctl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
# CI is a gate: the same examples on every run (derandomized, no example database), so a
# submission is judged on its own change, never on a lucky draw. Exploration happens on
# developers' machines (`make test` draws fresh examples each run) and in `make soak`.
settings.register_profile(
    "agentctl-ci",
    parent=settings.get_profile("agentctl"),
    derandomize=True,
    database=None,
)
settings.load_profile(
    "agentctl-ci" if os.environ.get("AGENTCTL_DERANDOMIZE") == "1" else "agentctl"
)


@pytest.fixture(autouse=True)
def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENTCTL_HOME", str(home))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("AGENTCTL_DB", raising=False)
    monkeypatch.delenv("AGENTCTL_SQLITE_SYNCHRONOUS", raising=False)
    monkeypatch.delenv("AGENTCTL_ARTIFACT_ROOT", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("AGENTCTL_TEST_NOW", raising=False)  # tests that want it set it
    # Telemetry is opt-in per test: a developer's OTEL_* settings must not export test runs.
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_TRACES_EXPORTER",
        "OTEL_SDK_DISABLED",
        "TRACEPARENT",
    ):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # An in-process CLI call leaves its --db in the hints' context; a later test in the same
    # worker (the Python API) must not see it in the commands it suggests.
    hints.use_database(None)


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def error_json(self) -> Any:
        return json.loads(self.stderr)


@pytest.fixture
def cli() -> Any:
    """Run the CLI in-process with captured streams: ``cli("db", "stats", "--db", p)``."""

    def invoke(*args: str | Path) -> CliResult:
        stdout, stderr = io.StringIO(), io.StringIO()
        argv: Sequence[str] = [str(a) for a in args]
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.stdout", stdout)
            patch.setattr("sys.stderr", stderr)
            code = cli_main.main(argv)
        output.set_current(output.Output())
        # The --db an invocation named colours its hints; a later test calling the Python
        # API directly in this process must not inherit it.
        hints.use_database(None)
        return CliResult(code, stdout.getvalue(), stderr.getvalue())

    return invoke


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL server for the session (see tests/pg/cluster.py), with a
    template database already migrated to this agentctl's schema."""
    cluster = start_cluster()
    try:
        from agentctl.store.engine import open_store

        template = cluster.create_database("agentctl_template")
        open_store(template).close()
        cluster.template = template.rpartition("/")[2]
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture
def postgres_url(
    postgres_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The URL of a fresh database at the current schema; its artifacts live in tmp_path."""
    url = postgres_cluster.take_migrated()
    monkeypatch.setenv("AGENTCTL_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    try:
        yield url
    finally:
        postgres_cluster.give_back(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database for a test that must hold on both backends: a SQLite file, or a fresh
    PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "r.db")
    return str(request.getfixturevalue("postgres_url"))


# Before xdist's own hook, which reads the xdist_group marks this one adds.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that need a real container engine run only where one is promised
    (AGENTCTL_REAL_CONTAINER_TESTS=1): they are deselected elsewhere, not skipped, so a
    skip in CI always means something is missing that should be there.

    Then the order for ``make test`` (``-n 2 --dist loadgroup``, which hands the workers one
    test at a time, in this order): tests marked ``slow`` first, so the long ones never
    start last on one worker while the other sits idle; and the tests of a module that
    share a module- or class-scoped fixture stay together on one worker, so that fixture
    is built once, not once per worker."""
    if os.environ.get("AGENTCTL_REAL_CONTAINER_TESTS") != "1":
        kept = [item for item in items if item.get_closest_marker("real_container") is None]
        if len(kept) != len(items):
            config.hook.pytest_deselected(
                items=[item for item in items if item.get_closest_marker("real_container")]
            )
            items[:] = kept
    for item in items:
        if getattr(config.option, "loadgroup", False) and _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.partition("::")[0]))
    # A stable sort: within each part the collection order (and so the fixtures' reuse) holds.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture scoped to its module or class."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definition.scope in ("module", "class")
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )
