"""`isolation: container` never runs on the host: a container runtime runs the command, or
the run is refused with `isolation.unavailable` (exit 3).

No container daemon is needed for most of these: a stand-in runtime executable placed first
on PATH records its argv and runs the command itself, so the exact command line is checked.
The real-daemon test runs only where Docker or Podman answers and holds a pinned image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers"
IMAGE = "registry.example/tools@sha256:" + "ab" * 32

STAND_IN = """#!{python}
import json, os, subprocess, sys
with open({log!r}, "a") as log:
    log.write(json.dumps(sys.argv) + "\\n")
args = sys.argv[1:]
if args[:1] == ["info"]:
    if {info_fails}:
        print("Cannot connect to the container daemon. Is it running?", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
if args[:1] == ["rm"]:
    sys.exit(0)
if args[:1] == ["run"]:
    at = args.index({image!r})
    options, command = args[:at], args[at + 1:]
    spec = options[options.index("--mount") + 1]
    mount = dict(p.split("=", 1) for p in spec.split(",") if "=" in p)
    workdir = options[options.index("--workdir") + 1]
    cwd = mount["source"] + workdir[len("/workspace"):]
    names = [options[i + 1] for i, a in enumerate(options) if a == "--env"]
    env = {{n: os.environ[n] for n in names if n in os.environ}}
    env["PATH"] = os.environ.get("PATH", "")
    sys.exit(subprocess.run(command, cwd=cwd, env=env).returncode)
sys.exit(125)
"""

SHELL = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: boxed}}
spec:
  policy:
    approval: never
    processAllowlist: [sh]
    environmentAllowlist: [GREETING, SECRET_GREETING]
  actions:
    boxed:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "echo hello $GREETING; touch ran-on-host 2>/dev/null || true"]
      env: {{GREETING: {{env: SECRET_GREETING}}}}
      isolation: container
      container:
        image: "{image}"
        runtime: {runtime}
        memoryLimitBytes: 33554432
        cpuLimitMillis: 500
        pidsLimit: 32
  tasks:
    - {{id: step, uses: "action:boxed"}}
"""


def _stand_in(directory: Path, name: str, log: Path, *, info_fails: bool = False) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(
        STAND_IN.format(python=sys.executable, log=str(log), info_fails=info_fails, image=IMAGE)
    )
    path.chmod(0o755)
    return path


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_container_run_uses_the_hardened_command_line(
    cli: Any,
    write_workflow: Any,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "runtime.log"
    docker = _stand_in(tmp_path / "bin", "docker", log)
    monkeypatch.setenv("PATH", f"{docker.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SECRET_GREETING", "there-9f8e")
    path = write_workflow(SHELL.format(image=IMAGE, runtime="auto"))
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["output"]["step"]["stdout"] == "hello [REDACTED]\n"
    effects = cli("--output", "json", "effects", "list", result.json()["data"]["runId"], "--db", db)
    (effect,) = effects.json()["data"]["effects"]
    calls = _calls(log)
    assert calls[0] == [str(docker), "info"]
    assert calls[1] == [
        str(docker),
        "run",
        "--rm",
        "--interactive",
        "--name",
        f"agentctl-{effect['effectId'][:24]}-run",
        "--pull",
        "never",
        "--network",
        "none",
        "--read-only",
        "--user",
        "65534:65534",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--tmpfs",
        "/tmp:rw,noexec,nosuid,nodev,size=67108864",
        "--memory",
        "33554432",
        "--memory-swap",
        "33554432",
        "--cpus",
        "0.5",
        "--pids-limit",
        "32",
        "--mount",
        f"type=bind,source={workspace.resolve()},target=/workspace,readonly",
        "--workdir",
        "/workspace",
        "--env",
        "AGENTCTL_IDEMPOTENCY_KEY",
        "--env",
        "GREETING",
        IMAGE,
        "sh",
        "-c",
        "echo hello $GREETING; touch ran-on-host 2>/dev/null || true",
    ]
    assert len(calls) == 2
    # The secret travels in the runtime client's environment, never on its command line.
    assert "there-9f8e" not in log.read_text()


def test_extension_handshake_and_invoke_run_in_containers(
    cli: Any,
    write_workflow: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "runtime.log"
    podman = _stand_in(tmp_path / "bin", "podman", log)
    monkeypatch.setenv("PATH", f"{podman.parent}{os.pathsep}{os.environ['PATH']}")
    python = Path(sys.executable).name
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: boxed-extension}}
        spec:
          policy: {{approval: never, processAllowlist: [{python}]}}
          actions:
            doubler:
              kind: extension.process
              command: "{sys.executable}"
              args: ["{FIXTURES / "extension.py"}", ok]
              idempotency: idempotent
              protocolVersion: agentctl.dev/process-extension/v1
              isolation: container
              container: {{image: "{IMAGE}", runtime: podman}}
              inputSchema:
                type: object
                properties: {{n: {{type: integer, maximum: 1000}}}}
                required: [n]
                additionalProperties: false
              outputSchema:
                type: object
                properties: {{doubled: {{type: integer}}}}
                required: [doubled]
              capabilities: [math]
          tasks:
            - {{id: double, uses: "action:doubler", with: {{n: 21}}}}
    """)
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["output"]["double"] == {"doubled": 42}
    runs = [call for call in _calls(log) if call[1] == "run"]
    assert [call[call.index("--name") + 1].rsplit("-", 1)[1] for call in runs] == [
        "handshake",
        "invoke",
    ]
    assert [call[-1] for call in runs] == ["--agentctl-handshake", "--agentctl-invoke"]
    assert all(call[call.index(IMAGE) + 1] == sys.executable for call in runs)


def test_refused_when_no_runtime_is_on_path(
    cli: Any,
    write_workflow: Any,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("SECRET_GREETING", "x")
    path = write_workflow(SHELL.format(image=IMAGE, runtime="auto"))
    db = tmp_path / "r.db"
    result = cli("--output", "json", "roll", path, "--db", db)
    assert result.exit_code == 3, result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "isolation.unavailable"
    assert "Docker or Podman" in error["message"]
    assert "`docker` is not on PATH" in error["message"]
    assert "`podman` is not on PATH" in error["message"]
    assert str(empty) in error["message"]
    assert not (workspace / "ran-on-host").exists()
    assert cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"] == []


def test_an_explicit_runtime_never_falls_back(
    cli: Any,
    write_workflow: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "runtime.log"
    docker = _stand_in(tmp_path / "bin", "docker", log, info_fails=True)
    _stand_in(tmp_path / "bin", "podman", tmp_path / "podman.log")
    monkeypatch.setenv("PATH", str(docker.parent))
    monkeypatch.setenv("SECRET_GREETING", "x")
    path = write_workflow(SHELL.format(image=IMAGE, runtime="docker"))
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    assert result.exit_code == 3, result.stderr
    message = result.error_json()["error"]["message"]
    assert f"`{docker} info` exited 1: Cannot connect to the container daemon" in message
    assert "podman" not in message.lower()
    assert not (tmp_path / "podman.log").exists()
    assert [call[1] for call in _calls(log)] == ["info"]


def test_check_does_not_need_a_runtime(
    cli: Any, write_workflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("SECRET_GREETING", "x")
    path = write_workflow(SHELL.format(image=IMAGE, runtime="auto"))
    result = cli("--output", "json", "roll", path, "--check")
    assert result.exit_code == 0, result.stderr
    assert result.json()["data"]["output"]["step"]["status"] == "requires_execution"


def test_a_container_action_may_not_set_engine_variables(cli: Any, write_workflow: Any) -> None:
    text = SHELL.format(image=IMAGE, runtime="auto").replace(
        "env: {GREETING: {env: SECRET_GREETING}}", "env: {DOCKER_HOST: {env: SECRET_GREETING}}"
    )
    result = cli("--output", "json", "check", write_workflow(text))
    assert result.exit_code == 2
    assert "DOCKER_HOST would steer the container runtime" in result.stderr


def _pinned_local_image() -> str | None:
    """A locally present image with a repo digest, when a real daemon answers."""
    from agentctl.errors import BlockedError
    from agentctl.tools.container import find_runtime

    try:
        runtime = find_runtime("auto", os.environ)
    except BlockedError:
        return None
    listed = subprocess.run(
        [runtime.path, "images", "--digests", "--format", "{{.Repository}}@{{.Digest}}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    for line in listed.stdout.splitlines():
        if "@sha256:" in line and not line.startswith("<none>"):
            return line.strip()
    return None


@pytest.mark.real_container
def test_real_daemon_runs_the_command_in_a_container(
    cli: Any, write_workflow: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = _pinned_local_image()
    assert image is not None, "AGENTCTL_REAL_CONTAINER_TESTS=1 needs a daemon and a pinned image"
    monkeypatch.setenv("SECRET_GREETING", "x")
    path = write_workflow(
        SHELL.format(image=image, runtime="auto").replace(
            '"echo hello $GREETING; touch ran-on-host 2>/dev/null || true"', '"id -u; touch /x"'
        )
    )
    result = cli("--output", "json", "roll", path, "--db", tmp_path / "r.db")
    # The root filesystem is read-only: touching / fails inside the container, as nobody.
    assert result.exit_code == 4
    inspection = result.error_json()["error"]
    assert "exit code" in inspection["message"]
