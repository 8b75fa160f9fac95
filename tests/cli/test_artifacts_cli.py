"""``agentctl artifacts …`` through the real entry point (envelopes, exit codes, hints).

Until ``artifacts`` is registered in ``agentctl.cli.app``, the fixture below serves the
group from a root app of its own; ``cli_main.main`` is otherwise exercised unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer

from agentctl.artifacts import ArtifactRef, ArtifactStore
from agentctl.cli import app as app_module
from agentctl.cli import artifacts as artifacts_cli
from agentctl.ids import FixedClock
from agentctl.store.engine import open_store


@pytest.fixture
def art(cli: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    root = typer.Typer(
        name="agentctl", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False
    )

    @root.callback()
    def _root() -> None:
        """agentctl (test root)."""

    root.add_typer(artifacts_cli.app, name="artifacts")
    monkeypatch.setattr(app_module, "app", root)
    return cli


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runtime.db"


@pytest.fixture
def seed(db: Path, tmp_path: Path) -> Callable[[bytes, str], ArtifactRef]:
    """Record bytes as a task completion would (clock in the past, so gc may take them)."""

    def record(data: bytes, name: str) -> ArtifactRef:
        source = tmp_path / f"src-{name}"
        source.write_bytes(data)
        with open_store(str(db)) as store:
            with store.write() as conn:
                conn.exec_driver_sql(
                    "INSERT OR IGNORE INTO runs (id, workflow_name, workflow_digest, "
                    "plan_digest, plan_json, status, created_at, updated_at) VALUES ('run-1', "
                    "'wf', 'a', 'b', '{}', 'succeeded', '2026-01-01 00:00:00.000000', "
                    "'2026-01-01 00:00:00.000000')"
                )
            artifacts = ArtifactStore.beside(store, FixedClock(datetime(2026, 1, 1, tzinfo=UTC)))
            blob = artifacts.ingest(source, holder="write")
            with store.write() as conn:
                return artifacts.record_ref(
                    conn, blob, run_id="run-1", task_id="write", name=name, path=name
                )

    return record


def test_list_filters_and_json_envelope(
    art: Any, db: Path, seed: Callable[[bytes, str], ArtifactRef]
) -> None:
    first = seed(b"one", "a.txt")
    seed(b"two", "b.txt")
    result = art("--output", "json", "artifacts", "list", "--db", db)
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["kind"] == "ArtifactList" and document["ok"] is True
    assert [a["name"] for a in document["data"]["artifacts"]] == ["a.txt", "b.txt"]
    result = art("--output", "json", "artifacts", "--db", db, "list", "--name", "a.txt")
    [only] = result.json()["data"]["artifacts"]
    assert (only["digest"], only["version"], only["runId"]) == (first.digest, 1, "run-1")
    human = art("artifacts", "list", "--db", db, "--run", "run-1", "--task", "write")
    assert human.exit_code == 0
    assert human.stdout.splitlines()[0].startswith(f"a.txt v1  {first.digest[:19]}  3 B")


def test_list_of_an_unknown_run_exits_5(art: Any, db: Path) -> None:
    from agentctl.store.engine import open_store

    open_store(str(db)).close()
    result = art("--output", "json", "artifacts", "list", "--db", db, "--run", "run-nope")
    assert result.exit_code == 5
    assert result.error_json()["error"]["code"] == "store.not_found"


def test_inspect_by_prefix_and_unknown_digest(
    art: Any, db: Path, seed: Callable[[bytes, str], ArtifactRef]
) -> None:
    ref = seed(b"inspect me", "i.txt")
    result = art("--output", "json", "artifacts", "inspect", ref.digest[7:19], "--db", db)
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert data["digest"] == ref.digest and data["present"] is True and data["size"] == 10
    assert [r["name"] for r in data["refs"]] == ["i.txt"]
    result = art("--output", "json", "artifacts", "inspect", "sha256:" + "e" * 64, "--db", db)
    assert result.exit_code == 5
    error = result.error_json()["error"]
    assert error["code"] == "artifact.not_found" and "artifacts list" in error["hint"]
    result = art("--output", "json", "artifacts", "inspect", "xyz", "--db", db)
    assert result.exit_code == 2 and result.error_json()["error"]["code"] == "artifact.bad_digest"


def test_verify_exits_5_and_names_the_corrupt_blob(
    art: Any, db: Path, seed: Callable[[bytes, str], ArtifactRef]
) -> None:
    ref = seed(b"intact", "v.txt")
    result = art("--output", "json", "artifacts", "verify", "--all", "--db", db)
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"] == {"checked": 1, "ok": 1, "problems": []}
    blob = db.parent / "artifacts" / "blobs" / ref.digest[7:9] / ref.digest[9:]
    os.chmod(blob, 0o600)
    blob.write_bytes(b"broken")
    result = art("--output", "json", "artifacts", "verify", ref.digest, "--db", db)
    assert result.exit_code == 5 and result.stdout == ""
    error = result.error_json()
    assert error["error"]["code"] == "artifact.verify_failed"
    [diagnostic] = error["diagnostics"]
    assert diagnostic["code"] == "artifact.corrupt" and diagnostic["file"] == str(blob)
    human = art("artifacts", "verify", "--db", db)
    assert human.exit_code == 5 and "v.txt" in human.stderr and "help:" in human.stderr
    both = art("--output", "json", "artifacts", "verify", ref.digest, "--all", "--db", db)
    assert both.exit_code == 2 and both.error_json()["error"]["code"] == "cli.usage"


def test_export_refuses_overwrite_then_overwrites(
    art: Any, db: Path, seed: Callable[[bytes, str], ArtifactRef]
) -> None:
    ref = seed(b"export me", "e.txt")
    result = art("--output", "json", "artifacts", "export", ref.digest, "out/e.txt", "--db", db)
    assert result.exit_code == 0, result.stderr
    target = Path.cwd() / "out" / "e.txt"
    assert result.json()["data"] == {"digest": ref.digest, "path": str(target), "size": 9}
    assert target.read_bytes() == b"export me"
    again = art("--output", "json", "artifacts", "export", ref.digest, "out/e.txt", "--db", db)
    assert again.exit_code == 2
    assert again.error_json()["error"]["hint"] == "pass --force to replace it"
    forced = art("artifacts", "export", ref.digest, "out/e.txt", "--overwrite", "--db", db)
    assert forced.exit_code == 0 and forced.stdout.startswith(f"exported {ref.digest}")
    # The operator's own destination may be anywhere they could write with cp.
    parent = art("--output", "json", "artifacts", "export", ref.digest, "../x", "--db", db)
    assert parent.exit_code == 0, parent.stderr
    assert (Path.cwd().parent / "x").read_bytes() == b"export me"


def test_gc_dry_run_then_collect(
    art: Any, db: Path, seed: Callable[[bytes, str], ArtifactRef]
) -> None:
    kept = seed(b"kept", "kept.txt")
    doomed = seed(b"doomed", "doomed.txt")
    with open_store(str(db)) as store, store.write() as conn:
        conn.exec_driver_sql("DELETE FROM artifact_refs WHERE blob_digest = ?", (doomed.digest,))
    dry = art("--output", "json", "artifacts", "gc", "--dry-run", "--db", db)
    assert dry.exit_code == 0, dry.stderr
    data = dry.json()["data"]
    assert data["dryRun"] is True and data["removedBlobs"] == [doomed.digest]
    assert data["keptReferenced"] == 1
    blobs = db.parent / "artifacts" / "blobs"
    assert len([p for p in blobs.rglob("*") if p.is_file()]) == 2
    recent = art("--output", "json", "artifacts", "gc", "--older-than-days", "100000", "--db", db)
    assert recent.json()["data"]["removedBlobs"] == []
    done = art("artifacts", "gc", "--db", db)
    assert done.exit_code == 0 and done.stdout.startswith("removed 1 blob(s)")
    assert [p.name for p in blobs.rglob("*") if p.is_file()] == [kept.digest[9:]]
    negative = art("--output", "json", "artifacts", "gc", "--older-than-days", "-1", "--db", db)
    assert negative.exit_code == 2


def test_every_artifacts_command_has_help(art: Any) -> None:
    for command in ("list", "versions", "inspect", "verify", "export", "gc"):
        result = art("artifacts", command, "--help")
        assert result.exit_code == 0 and "--db" in result.stdout, command


def test_importing_the_command_group_does_not_import_sqlalchemy() -> None:
    """``agentctl --help`` builds every group; SQLAlchemy must load only inside commands."""
    code = (
        "import sys, agentctl.cli.artifacts; "
        "sys.exit(any(m.startswith('sqlalchemy') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
