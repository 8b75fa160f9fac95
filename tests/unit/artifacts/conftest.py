"""A real SQLite database and artifact store under tmp_path, with an injected clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentctl.artifacts import ArtifactRef, ArtifactStore, IngestedBlob
from agentctl.ids import FixedClock
from agentctl.store.engine import Store, StoreSettings, open_store


def insert_run(store: Store, run_id: str) -> None:
    with store.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO runs (id, workflow_name, workflow_digest, plan_digest, plan_json, "
            "status, created_at, updated_at) VALUES (?, 'wf', 'sha256:a', 'sha256:b', '{}', "
            "'running', '2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000')",
            (run_id,),
        )


@pytest.fixture
def clock() -> FixedClock:
    # A day ahead of the wall clock: files written during the test have mtimes in the
    # clock's past, so gc with --older-than-days 0 treats them as old enough.
    return FixedClock(datetime.now(UTC) + timedelta(days=1))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runtime.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    with open_store(str(db_path), settings=StoreSettings(synchronous="OFF")) as opened:
        insert_run(opened, "run-1")
        yield opened


@pytest.fixture
def add_run(store: Store) -> Callable[[str], None]:
    return lambda run_id: insert_run(store, run_id)


@pytest.fixture
def artifacts(store: Store, clock: FixedClock) -> ArtifactStore:
    return ArtifactStore.beside(store, clock)


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, bytes], Path]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    def write(name: str, data: bytes) -> Path:
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return write


@pytest.fixture
def recorded(
    artifacts: ArtifactStore, store: Store, write_file: Callable[[str, bytes], Path]
) -> Callable[..., ArtifactRef]:
    """Ingest bytes and commit a ref for them, as a task completion would."""

    def record(
        data: bytes, name: str = "report.txt", run_id: str = "run-1", task_id: str = "write"
    ) -> ArtifactRef:
        blob: IngestedBlob = artifacts.ingest(write_file(name, data), holder=task_id)
        with store.write() as conn:
            return artifacts.record_ref(
                conn, blob, run_id=run_id, task_id=task_id, name=name, path=name
            )

    return record
