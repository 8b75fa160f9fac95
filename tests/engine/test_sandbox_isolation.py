"""`isolation: sandbox` through the real path: `agentctl roll` runs a real bubblewrap sandbox.

Each escape attempt runs inside a sandboxed step and is refused; the run's records say so
(the task's error code, the effect's recorded isolation). Limits are breached for real: a
fork bomb, a memory hog, a 2 GB file, a CPU spinner and a sleeper. See docs/isolation.md.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.engine.sandboxes import SYSTEM_PYTHON, require_bwrap, shell_workflow

pytestmark = pytest.mark.usefixtures("bwrap")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol_servers"
PY_ALLOW = "[sh, python3, dd, sleep]"


@pytest.fixture
def bwrap() -> None:
    require_bwrap()


def _roll(cli: Any, path: Path, db: Path) -> Any:
    return cli("--output", "json", "roll", path, "--db", db)


def _effect(cli: Any, run_id: str, db: Path) -> dict[str, Any]:
    effects = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]["effects"]
    (effect,) = effects
    shown = cli("--output", "json", "effects", "inspect", effect["effectId"], "--db", db)
    data: dict[str, Any] = shown.json()["data"]
    return data


def _task_error(cli: Any, result: Any, db: Path) -> dict[str, Any]:
    run_id = result.error_json()["error"]["runId"]
    shown = cli("--output", "json", "inspect", run_id, "--db", db).json()["data"]
    (task,) = shown["tasks"]
    error: dict[str, Any] = task["error"]
    return error


def test_a_step_without_limits_runs_and_its_effect_records_the_sandbox(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    path = write_workflow(shell_workflow(["-c", "echo hello; echo made > out/made.txt; ls /"]))
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]["step"]
    assert output["stdout"].startswith("hello\n")
    # Only the system, the private mounts and the workspace's own top directory are there.
    assert "root" not in output["stdout"].split() and "home" not in output["stdout"].split()
    assert (workspace / "out" / "made.txt").read_text() == "made\n"
    effect = _effect(cli, result.json()["data"]["runId"], db)
    request = json.dumps(effect)
    assert '"isolation": "sandbox"' in request
    assert '"network": false' in request


def test_plan_shows_the_isolation_and_limits(cli: Any, write_workflow: Any) -> None:
    limits = "{network: true, limits: {cpuSeconds: 5, memoryBytes: 67108864, processes: 16}}"
    path = write_workflow(shell_workflow(["-c", "true"], sandbox=limits))
    shown = cli("plan", path)
    assert shown.exit_code == 0, shown.stderr
    assert "isolation sandbox: host network, cpu 5s, memory 64 MiB, processes 16" in shown.stdout
    data = cli("--output", "json", "plan", path).json()["data"]
    assert data["isolation"]["step"]["sandbox"]["network"] is True


def test_writes_outside_the_writable_roots_are_refused(
    cli: Any, write_workflow: Any, workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "out").mkdir()
    (workspace / "out" / "link").symlink_to(elsewhere)
    script = (
        f"echo x > {workspace}/outside.txt; echo x > out/link/through-link.txt; "
        f"echo x > {elsewhere}/direct.txt; echo x > /usr/pwned; "
        "ls out/link/ 2>&1; exit 7"
    )
    path = write_workflow(shell_workflow(["-c", script]))
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 4
    assert _task_error(cli, result, db)["code"] == "subprocess.failed"
    assert not (workspace / "outside.txt").exists()
    assert list(elsewhere.iterdir()) == []
    assert not Path("/usr/pwned").exists()


def test_root_home_and_the_database_cannot_be_read(
    cli: Any,
    write_workflow: Any,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-7f3a\n")
    monkeypatch.setenv("HOME", str(home))
    # The database lives in the workspace, where the sandbox could otherwise read it.
    db = workspace / ".agentctl" / "runtime.db"
    script = (
        f"ls /root; cat {home}/.ssh/id_ed25519; cat .agentctl/runtime.db; "
        f"cat {db}; cat /etc/shadow; echo end"
    )
    path = write_workflow(shell_workflow(["-c", script]))
    result = _roll(cli, path, db)
    assert result.exit_code == 0, result.stderr
    output = result.json()["data"]["output"]["step"]
    assert output["stdout"] == "end\n"
    assert "No such file or directory" in output["stderr"]
    assert "PRIVATE-KEY" not in output["stdout"] + output["stderr"]
    assert "SQLite" not in output["stdout"]


class _Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.socket.settimeout(0.2)
        self.port = int(self.socket.getsockname()[1])
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.mark.parametrize("network", [False, True])
def test_network_only_when_declared(
    cli: Any, write_workflow: Any, tmp_path: Path, network: bool
) -> None:
    listener = _Listener()
    try:
        code = (
            "import socket, sys\n"
            f"try: socket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\n"
            "except OSError as e: print('refused', e); sys.exit(3)\n"
            "print('connected')"
        )
        path = write_workflow(
            shell_workflow(
                ["-c", code],
                command=SYSTEM_PYTHON,
                allow=PY_ALLOW,
                sandbox=f"{{network: {str(network).lower()}}}",
            )
        )
        db = tmp_path / "r.db"
        result = _roll(cli, path, db)
    finally:
        listener.close()
    if network:
        assert result.exit_code == 0, result.stderr
        assert listener.accepted == 1
        return
    assert result.exit_code == 4
    error = _task_error(cli, result, db)
    assert error["code"] == "subprocess.failed"
    assert "refused" in error["details"]["stdout"]
    assert listener.accepted == 0


def test_the_agentctl_process_cannot_be_signalled(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, _frame: received.append(number))
    try:
        script = f"kill -USR1 {os.getpid()} && echo sent; kill -USR1 1 && echo init"
        path = write_workflow(shell_workflow(["-c", script]))
        db = tmp_path / "r.db"
        result = _roll(cli, path, db)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == []
    # A fresh PID namespace: agentctl's pid is not there, and pid 1 is bubblewrap's init.
    assert result.exit_code in (0, 4)
    if result.exit_code == 0:
        assert "sent" not in result.json()["data"]["output"]["step"]["stdout"]


FORK_BOMB = """
import os, sys, time
children = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        children += 1
except OSError as exc:
    print("fork refused after", children, exc)
    sys.exit(1)
print("forked", children)
"""


@pytest.mark.parametrize(
    ("name", "command", "args", "limits", "code"),
    [
        ("fork bomb", SYSTEM_PYTHON, ["-c", FORK_BOMB], "{processes: 8}", "sandbox.process_limit"),
        (
            "memory hog",
            SYSTEM_PYTHON,
            ["-c", "hog = b'x' * (512 * 1024 * 1024); print(len(hog))"],
            "{memoryBytes: 67108864}",
            "sandbox.memory_limit",
        ),
        (
            "2 GB file",
            "dd",
            ["if=/dev/zero", "of=out/big", "bs=1M", "count=2048"],
            "{fileSizeBytes: 1048576}",
            "sandbox.file_size_limit",
        ),
        (
            "cpu spinner",
            SYSTEM_PYTHON,
            ["-c", "while True: pass"],
            "{cpuSeconds: 1}",
            "sandbox.cpu_limit",
        ),
    ],
)
def test_a_breached_limit_is_a_named_task_error(
    cli: Any,
    write_workflow: Any,
    workspace: Path,
    tmp_path: Path,
    name: str,
    command: str,
    args: list[str],
    limits: str,
    code: str,
) -> None:
    path = write_workflow(
        shell_workflow(args, command=command, allow=PY_ALLOW, sandbox=f"{{limits: {limits}}}")
    )
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 4, f"{name}: {result.stdout}{result.stderr}"
    error = _task_error(cli, result, db)
    assert error["code"] == code, f"{name}: {error}"
    if code == "sandbox.file_size_limit":
        assert (workspace / "out" / "big").stat().st_size <= 1048576


def test_a_sleeper_past_its_wall_time_is_killed_and_left_uncertain(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    path = write_workflow(shell_workflow(["300"], command="sleep", allow=PY_ALLOW, timeout=1))
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 3, result.stdout + result.stderr
    assert result.json()["data"]["state"] == "paused"
    effect = _effect(cli, result.json()["data"]["runId"], db)
    assert effect["status"] == "uncertain"
    assert effect["error"]["details"]["limit"] == "sandbox.wall_time_limit"
    assert "timed out after 1s" in effect["error"]["message"]


def test_an_extension_runs_in_the_sandbox(cli: Any, write_workflow: Any, tmp_path: Path) -> None:
    path = write_workflow(f"""
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: boxed-extension}}
        spec:
          policy: {{approval: never, processAllowlist: [python3]}}
          actions:
            doubler:
              kind: extension.process
              command: "{SYSTEM_PYTHON}"
              args: ["{FIXTURES / "extension.py"}", ok]
              idempotency: idempotent
              protocolVersion: agentctl.dev/process-extension/v1
              isolation: sandbox
              sandbox: {{readPaths: ["{FIXTURES}"], limits: {{processes: 16}}}}
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
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.json()["data"]["output"]["double"] == {"doubled": 42}
    assert '"isolation": "sandbox"' in json.dumps(_effect(cli, result.json()["data"]["runId"], db))


def test_refused_when_bubblewrap_is_missing(
    cli: Any,
    write_workflow: Any,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(bin_dir))
    path = write_workflow(shell_workflow(["-c", "touch ran-on-host"]))
    db = tmp_path / "r.db"
    result = _roll(cli, path, db)
    assert result.exit_code == 3, result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "isolation.unavailable"
    assert "`bwrap` is not on PATH" in error["message"]
    assert "apt-get install bubblewrap" in error["hint"]
    assert not (workspace / "ran-on-host").exists()
    assert cli("--output", "json", "runs", "list", "--db", db).json()["data"]["runs"] == []


def test_refused_when_bubblewrap_cannot_build_a_sandbox(
    cli: Any,
    write_workflow: Any,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to("/bin/sh")
    fake = bin_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    path = write_workflow(shell_workflow(["-c", "touch ran-on-host"]))
    result = _roll(cli, path, tmp_path / "r.db")
    assert result.exit_code == 3, result.stderr
    error = result.error_json()["error"]
    assert error["code"] == "isolation.unavailable"
    assert "No permissions to creating new namespace" in error["message"]
    assert not (workspace / "ran-on-host").exists()


def test_a_monitor_command_runs_in_the_workflows_sandbox(
    write_workflow: Any, workspace: Path
) -> None:
    from agentctl.engine import monitor_commands

    path = write_workflow(shell_workflow(["-c", "true"], allow="[sh, ls]"))
    workflow = monitor_commands.workflow_document(str(path))
    assert monitor_commands.check_command(workflow, ["ls", "/root"]) == "sandbox"
    refused = monitor_commands.observe_command(workflow, ["ls", "/root"], workspace)
    assert refused["exitCode"] != 0
    listed = monitor_commands.observe_command(workflow, ["ls", str(workspace)], workspace)
    assert listed["exitCode"] == 0


def test_the_approval_says_the_step_reaches_the_host_network(
    cli: Any, write_workflow: Any, tmp_path: Path
) -> None:
    text = shell_workflow(["-c", "true"], sandbox="{network: true}")
    path = write_workflow(text.replace("approval: never", "approval: always"))
    db = tmp_path / "r.db"
    paused = _roll(cli, path, db)
    assert paused.exit_code == 3, paused.stderr
    (approval,) = cli("--output", "json", "approvals", "list", "--db", db).json()["data"][
        "approvals"
    ]
    assert approval["prompt"] == "run sh -c true (sandbox: host network)"
    assert approval["input"]["isolation"] == "sandbox"
    assert approval["input"]["sandbox"]["network"] is True
