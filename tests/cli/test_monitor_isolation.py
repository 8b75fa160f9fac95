"""A monitor's `--command` obeys the monitored workflow's `builtin.shell.exec` rules: when the
workflow's shell actions run in containers, so does the command (through the same hardened
command line), and with no container runtime it records an error observation instead of
running on the host.

A stand-in runtime executable first on PATH records its argv and runs the command itself
(the technique of tests/engine/test_container_isolation.py), so no container daemon is
needed and the exact command line is checked.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_container_isolation import IMAGE, STAND_IN

BOXED = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: boxed}}
spec:
  inputs: {{previous: null, current: null, observedAt: null}}
  policy: {{approval: never, processAllowlist: [sh, cat, touch]}}
  actions:
    check: {{kind: builtin.assert}}
    boxed:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo boxed"]
      isolation: container
      container: {{image: "{image}", runtime: docker, pidsLimit: 16}}
  tasks:
    - id: check
      uses: action:check
      with: {{that: "${{{{ inputs.observedAt != null }}}}"}}
    - {{id: inside, uses: "action:boxed", needs: [check]}}
"""
T0 = "2026-05-01T00:00:00Z"


def _at(minutes: int) -> str:
    return f"2026-05-01T00:{minutes:02d}:00Z"


def _runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, info_fails: bool) -> Path:
    """A stand-in `docker` first on PATH; returns the file its calls are logged to."""
    log = tmp_path / "runtime.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(
        STAND_IN.format(python=sys.executable, log=str(log), info_fails=info_fails, image=IMAGE)
    )
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _setup(cli: Any, db: str) -> str:
    Path("workflows").mkdir()
    (Path("workflows") / "boxed.yaml").write_text(textwrap.dedent(BOXED.format(image=IMAGE)))
    added = cli(
        "monitor", "add", "tag", "boxed", "--command", "cat tag.txt",
        "--every", "1m", "--start", T0, "--db", db,
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    return db


def _tick(cli: Any, db: str, now: str) -> dict[str, Any]:
    result = cli("--output", "json", "daemon", "--once", "--now", now, "--db", db)
    assert result.exit_code == 0, result.stderr
    return dict(result.json()["data"])


def _observations(cli: Any, db: str) -> list[dict[str, Any]]:
    shown = cli("--output", "json", "monitor", "show", "tag", "--db", db)
    assert shown.exit_code == 0, shown.stderr
    return list(shown.json()["data"]["observations"])


def test_the_command_runs_in_the_workflows_container(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    log = _runtime(tmp_path, monkeypatch, info_fails=False)
    Path("tag.txt").write_text("v1\n")
    db = _setup(cli, database)
    _tick(cli, db, _at(1))
    runs = [call for call in map(json.loads, log.read_text().splitlines()) if call[1] == "run"]
    (call,) = runs
    project = str(Path.cwd().resolve())
    assert call[call.index(IMAGE) :] == [IMAGE, "cat", "tag.txt"]
    options = call[: call.index(IMAGE)]
    for flag, value in (
        ("--network", "none"),
        ("--user", "65534:65534"),
        ("--cap-drop", "ALL"),
        ("--pids-limit", "16"),
        ("--mount", f"type=bind,source={project},target=/workspace,readonly"),
        ("--pull", "never"),
    ):
        assert options[options.index(flag) + 1] == value, flag
    assert "--read-only" in options
    assert options[options.index("--name") + 1].endswith("-monitor")
    (baseline,) = _observations(cli, db)
    assert baseline["outcome"] == "baseline" and baseline["value"]["exitCode"] == 0
    Path("tag.txt").write_text("v2\n")
    (fired,) = _tick(cli, db, _at(2))["fired"]
    assert fired["slot"] == _at(2)


def test_without_a_container_runtime_the_command_never_runs_on_the_host(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    log = _runtime(tmp_path, monkeypatch, info_fails=True)
    Path("workflows").mkdir()
    (Path("workflows") / "boxed.yaml").write_text(textwrap.dedent(BOXED.format(image=IMAGE)))
    db = tmp_path / "m.db"
    added = cli(
        "monitor", "add", "tag", "boxed", "--command", "touch ran-on-host",
        "--every", "1m", "--start", T0, "--db", db,
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    report = _tick(cli, db, _at(1))
    assert report["fired"] == []
    (observed,) = _observations(cli, db)
    assert observed["value"]["error"] == "isolation.unavailable"
    assert "monitor command `touch`" in observed["value"]["message"]
    assert "Cannot connect to the container daemon" in observed["value"]["message"]
    assert not Path("ran-on-host").exists()  # the host never ran it
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [call[1] for call in calls] == ["info"]  # asked, refused, nothing run


def test_the_allow_list_applies_in_the_container_too(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    _runtime(tmp_path, monkeypatch, info_fails=False)
    Path("workflows").mkdir()
    (Path("workflows") / "boxed.yaml").write_text(textwrap.dedent(BOXED.format(image=IMAGE)))
    refused = cli(
        "--output", "json", "monitor", "add", "x", "boxed", "--command", "git describe",
        "--every", "1m", "--db", tmp_path / "m.db",
    )  # fmt: skip
    assert refused.exit_code == 4
    assert refused.error_json()["error"]["code"] == "policy.process_not_allowed"
