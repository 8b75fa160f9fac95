"""`python.function` steps through the real path: a real `agentctl roll` (SIGKILLed where a
fault point says), the function in a real child process, every `ctx` operation an effect
in a real SQLite journal, an external ledger file as the outside world
(docs/python-steps.md)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.forkserver import run_agentctl

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: steps}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    step:
      kind: python.function
      function: steps:main
      timeoutSeconds: %(timeout)s
  tasks:
    - {id: work, uses: "action:step", with: {name: ada}}
"""

TWO_SHELLS = """
def main(ctx, inputs):
    a = ctx.shell("sh", ["-c", "echo a >> ledger.txt"])
    b = ctx.shell("sh", ["-c", "echo b >> ledger.txt"])
    return {"exits": [a["exitCode"], b["exitCode"]], "name": inputs["name"]}
"""

ASKING = """
def main(ctx, inputs):
    ctx.shell("sh", ["-c", "echo %(first)s >> ledger.txt"])
    answer = ctx.ask("ship it?", choices=["yes", "no"])
    stamp = ctx.uuid()
    ctx.write("out/answer.txt", answer)
    return {"answer": answer, "stamp": stamp}
"""


def _setup(ws: Path, steps: str, timeout: int = 60) -> Path:
    ws.mkdir(exist_ok=True)
    (ws / "wf.yaml").write_text(textwrap.dedent(WORKFLOW % {"timeout": timeout}))
    (ws / "steps.py").write_text(textwrap.dedent(steps))
    return ws / "r.db"


def _killed_roll(ws: Path, db: Path, fault: str) -> subprocess.CompletedProcess[str]:
    """A real `agentctl roll` that SIGKILLs itself at ``fault``."""
    env = {**os.environ, "AGENTCTL_FAULT": fault}
    return run_agentctl(
        ["--output", "json", "roll", "wf.yaml", "--db", str(db)], cwd=ws, env=env, timeout=120
    )


def _run_id(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    return str(run_id)


def _effects(db: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT ordinal, operation, status FROM effects ORDER BY attempt, ordinal"
        ).fetchall()
    conn.close()
    return [(int(o), str(op), str(s)) for o, op, s in rows]


def _ledger(ws: Path) -> list[str]:
    path = ws / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def _settled(ws: Path) -> None:
    """The killed owner's function process ends on its own (its stdin closed)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        busy = False
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    busy = busy or Path(os.readlink(entry / "cwd")) == ws
                except OSError:
                    continue
        if not busy:
            return
        time.sleep(0.02)


def test_kill_between_two_shells_resumes_without_repeating_the_first(
    cli: Any, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    db = _setup(ws, TWO_SHELLS)
    killed = _killed_roll(ws, db, "effect.finished:1")  # the first ctx.shell confirmed
    assert killed.returncode == -9, killed.stderr
    _settled(ws)
    assert _ledger(ws) == ["a"]
    assert _effects(db) == [(1, "builtin.shell.exec", "succeeded")]

    resumed = cli("--output", "json", "resume", _run_id(db), "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["data"]["output"]["work"] == {"exits": [0, 0], "name": "ada"}
    assert _ledger(ws) == ["a", "b"]  # the first not dispatched again, the second once
    assert _effects(db) == [
        (1, "builtin.shell.exec", "succeeded"),
        (2, "builtin.shell.exec", "succeeded"),
    ]


def test_kill_while_an_operation_is_in_flight_leaves_it_uncertain(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    db = _setup(ws, TWO_SHELLS)
    killed = _killed_roll(ws, db, "effect.dispatched:2")  # `echo b` ran, not recorded
    assert killed.returncode == -9, killed.stderr
    _settled(ws)
    run_id = _run_id(db)
    for _ in range(2):  # resuming again changes nothing: never repeated
        blocked = cli("--output", "json", "resume", run_id, "--db", db)
        assert blocked.exit_code == 3, blocked.stderr
        assert _ledger(ws) == ["a", "b"]
        assert _effects(db)[-1] == (2, "builtin.shell.exec", "uncertain")

    # The operator says the second never took effect: the function asks again at the
    # next position, and the first (confirmed) is still not repeated.
    listed = cli("--output", "json", "effects", "list", run_id, "--db", db).json()["data"]
    uncertain = [e["effectId"] for e in listed["effects"] if e["status"] == "uncertain"]
    concluded = cli(
        "reconcile", uncertain[0], "--status", "not-applied", "--reason", "t", "--db", db
    )
    assert concluded.exit_code == 0, concluded.stderr
    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.exit_code == 0, done.stderr
    assert _ledger(ws) == ["a", "b", "b"]
    assert [e[2] for e in _effects(db)] == ["succeeded", "uncertain", "succeeded"]


def test_ask_parks_and_the_answer_resumes(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    db = _setup(ws, ASKING % {"first": "a"})
    parked = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert parked.exit_code == 3, parked.stderr
    run_id = parked.json()["data"]["runId"]
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", db).json()["data"]
    (question,) = [a for a in listed["approvals"] if a["status"] == "pending"]
    assert question["prompt"] == "ship it?"
    # Re-running the parked function does not ask twice or repeat its shell.
    again = cli("--output", "json", "resume", run_id, "--db", db)
    assert again.exit_code == 3, again.stderr
    assert _ledger(ws) == ["a"]

    answered = cli("approvals", "answer", question["approvalId"], '"yes"', "--db", db)
    assert answered.exit_code == 0, answered.stderr
    resumed = cli("--output", "json", "resume", run_id, "--db", db)
    assert resumed.exit_code == 0, resumed.stderr
    output = resumed.json()["data"]["output"]["work"]
    assert output["answer"] == "yes" and len(output["stamp"]) == 36
    assert (ws / "out" / "answer.txt").read_text() == "yes"
    assert _ledger(ws) == ["a"]
    operations = [op for _, op, _ in _effects(db)]
    assert operations == ["builtin.shell.exec", "step.ask", "step.uuid", "builtin.write"]


def test_a_changed_function_is_step_nondeterministic(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    db = _setup(ws, ASKING % {"first": "a"})
    parked = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert parked.exit_code == 3, parked.stderr
    (ws / "steps.py").write_text(textwrap.dedent(ASKING % {"first": "z"}))
    failed = cli("--output", "json", "resume", parked.json()["data"]["runId"], "--db", db)
    assert failed.exit_code == 4, failed.stderr
    text = failed.stdout + failed.stderr
    assert json.loads(text)["error"]["code"] == "step.nondeterministic"
    assert "at position 1" in text
    assert "echo a >> ledger.txt" in text and "echo z >> ledger.txt" in text
    assert "ctx.now()" in text  # the fix
    assert _ledger(ws) == ["a"]  # the changed request was never dispatched


def test_a_timeout_kills_the_function_and_its_process_group(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    steps = """
    import subprocess, time

    def main(ctx, inputs):
        child = subprocess.Popen(["sleep", "60"])
        with open("grandchild.pid", "w") as handle:
            handle.write(str(child.pid))
        time.sleep(60)
    """
    db = _setup(ws, steps, timeout=1)
    started = time.monotonic()
    failed = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert time.monotonic() - started < 30
    assert failed.exit_code == 4, failed.stderr
    assert json.loads(failed.stdout + failed.stderr)["error"]["code"] == "task.timeout"
    pid = int((ws / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.02)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_errors_of_the_function_and_of_its_operations(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    steps = """
    def main(ctx, inputs):
        try:
            ctx.shell("sh", ["-c", "exit 3"])
        except Exception as error:
            caught = error.code
        print("to stderr, not the protocol")
        raise RuntimeError("after " + caught)
    """
    db = _setup(ws, steps)
    failed = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert failed.exit_code == 4, failed.stderr
    error = json.loads(failed.stdout + failed.stderr)["error"]
    assert error["code"] == "step.failed"
    assert "RuntimeError: after subprocess.failed" in error["message"]


def test_a_sandboxed_step_and_its_shell_calls_run_in_the_sandbox(cli: Any, tmp_path: Path) -> None:
    from tests.engine.sandboxes import SYSTEM_PYTHON, require_bwrap

    require_bwrap()
    ws = tmp_path / "ws"
    secret = tmp_path / "secret.txt"  # outside the workspace: not in the sandbox
    secret.write_text("s")
    steps = f"""
    import os

    def main(ctx, inputs):
        seen = ctx.shell("sh", ["-c", "test -e {secret} && echo host || echo hidden"])
        return {{"function": os.path.exists("{secret}"), "shell": seen["stdout"].strip()}}
    """
    db = _setup(ws, steps)
    text = (ws / "wf.yaml").read_text()
    (ws / "wf.yaml").write_text(
        text.replace(
            "      timeoutSeconds: 60",
            f"      timeoutSeconds: 60\n      python: {SYSTEM_PYTHON}\n      isolation: sandbox",
        )
    )
    done = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["output"]["work"] == {"function": False, "shell": "hidden"}
    listed = cli("--output", "json", "effects", "list", _run_id(db), "--db", db).json()["data"]
    (shell,) = listed["effects"]
    assert shell["request"]["isolation"] == "sandbox"


def test_a_containerised_step_runs_through_the_container_runtime(
    cli: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A stand-in runtime first on PATH records its argv and runs the command itself (as in
    test_container_isolation): the function's process is started by the runtime, with the
    image's interpreter and its module folder relative to the container's working
    directory."""
    from tests.engine.test_container_isolation import IMAGE, _calls, _stand_in

    log = tmp_path / "runtime.log"
    docker = _stand_in(tmp_path / "bin", "docker", log)
    monkeypatch.setenv("PATH", f"{docker.parent}{os.pathsep}{os.environ['PATH']}")
    ws = tmp_path / "ws"
    db = _setup(ws, "def main(ctx, inputs):\n    return {'hello': inputs['name']}\n")
    text = (ws / "wf.yaml").read_text()
    (ws / "wf.yaml").write_text(
        text.replace(
            "      timeoutSeconds: 60",
            "      timeoutSeconds: 60\n      python: python3\n      isolation: container\n"
            f'      container: {{image: "{IMAGE}"}}',
        )
    )
    done = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert done.exit_code == 0, done.stderr
    assert done.json()["data"]["output"]["work"] == {"hello": "ada"}
    run = next(call for call in _calls(log) if call[1] == "run")
    assert run[run.index(IMAGE) + 1 : run.index(IMAGE) + 3] == ["python3", "-c"]
    assert "--network" in run and run[run.index("--network") + 1] == "none"


RECORDING = """
def main(ctx, inputs):
    stamp = ctx.now().isoformat()
    ident = ctx.uuid()
    answer = ctx.ask("ship it?", choices=["yes", "no"])
    ctx.write("out/answer.txt", answer)
    return {"answer": answer, "stamp": stamp, "id": ident}
"""


def _pending(cli: Any, run_id: str, db: Path) -> list[dict[str, Any]]:
    listed = cli("--output", "json", "approvals", "list", run_id, "--db", db).json()["data"]
    return [a for a in listed["approvals"] if a["status"] == "pending"]


def test_recorded_operations_ask_no_approval_under_approval_always(
    cli: Any, tmp_path: Path
) -> None:
    """`ctx.now`, `ctx.uuid` and `ctx.ask` only record a value: `approval: always` (and a
    `toolsAllow` list) concern effects on the world, here the write alone."""
    ws = tmp_path / "ws"
    db = _setup(ws, RECORDING)
    text = (ws / "wf.yaml").read_text()
    (ws / "wf.yaml").write_text(
        text.replace("approval: never", "approval: always, toolsAllow: [filesystem.write]")
    )
    parked = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert parked.exit_code == 3, parked.stdout + parked.stderr
    run_id = parked.json()["data"]["runId"]
    (question,) = _pending(cli, run_id, db)
    assert question["kind"] == "question" and question["prompt"] == "ship it?"
    answered = cli("approvals", "answer", question["approvalId"], '"yes"', "--db", db)
    assert answered.exit_code == 0, answered.stderr

    gated = cli("--output", "json", "resume", run_id, "--db", db)
    assert gated.exit_code == 3, gated.stdout + gated.stderr
    (approval,) = _pending(cli, run_id, db)
    with sqlite3.connect(db) as conn:
        (operation,) = conn.execute(
            "SELECT operation FROM effects WHERE id = ?", (approval["effectId"],)
        ).fetchone()
    conn.close()
    assert approval["kind"] == "approval" and operation == "builtin.write"
    approved = cli("approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", db)
    assert approved.exit_code == 0, approved.stderr
    done = cli("--output", "json", "resume", run_id, "--db", db)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert done.json()["data"]["output"]["work"]["answer"] == "yes"
    assert [op for _, op, _ in _effects(db)] == [
        "step.now",
        "step.uuid",
        "step.ask",
        "builtin.write",
    ]


def _workflow(ws: Path, extra: str, function: str = "steps:main") -> None:
    text = textwrap.dedent(WORKFLOW % {"timeout": 60}).replace("steps:main", function)
    (ws / "wf.yaml").write_text(text.replace("spec:\n", "spec:\n" + extra, 1))


def test_spec_python_path_is_where_functions_import_from(cli: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "lib" / "release").mkdir(parents=True)
    (ws / "lib" / "release" / "__init__.py").write_text("")
    (ws / "lib" / "release" / "steps.py").write_text(
        "from release.names import greet\n\ndef main(ctx, inputs):\n"
        "    return {'hello': greet(inputs['name'])}\n"
    )
    (ws / "lib" / "release" / "names.py").write_text("def greet(name):\n    return name.upper()\n")
    _workflow(ws, "  python: {path: [lib]}\n", "release.steps:main")
    done = cli("--output", "json", "roll", ws / "wf.yaml", "--db", ws / "r.db")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert done.json()["data"]["output"]["work"] == {"hello": "ADA"}


def test_check_names_the_field_and_task_of_a_missing_folder_or_module(
    cli: Any, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    cases = [
        ("  python: {path: [lib]}\n", "steps:main", "spec.python.path[0]", "lib"),
        ("", "nowhere.steps:main", "spec.actions.step.function", "module `nowhere.steps`"),
        ("", "missing.py:main", "spec.actions.step.function", "missing.py"),
        ("", "broken:main", "spec.actions.step.function", "does not parse"),
    ]
    (ws / "broken.py").write_text("def main(ctx, inputs)\n    return 1\n")
    for extra, function, field, named in cases:
        _workflow(ws, extra, function)
        checked = cli("--output", "json", "check", ws / "wf.yaml")
        assert checked.exit_code == 2, (function, checked.stdout + checked.stderr)
        (problem,) = json.loads(checked.stdout + checked.stderr)["diagnostics"]
        assert problem["path"] == field, problem
        assert named in problem["message"] and "work" in problem["message"], problem
        assert problem["line"] > 1, problem


LEDGER_ONCE = """
def main(ctx, inputs):
    ctx.shell("sh", ["-c", "echo a >> ledger.txt"])
    return {}
"""


def test_repair_reruns_a_yaml_function_whose_module_changed(cli: Any, tmp_path: Path) -> None:
    """A YAML `python.function` without `sourceDigest` gets its module's digest: a changed
    module is a changed step, so `repair` runs it again; an unchanged one is reused."""
    ws = tmp_path / "ws"
    db = _setup(ws, LEDGER_ONCE)
    rolled = cli("--output", "json", "roll", ws / "wf.yaml", "--db", db)
    assert rolled.exit_code == 0, rolled.stdout + rolled.stderr
    first = rolled.json()["data"]["runId"]

    same = cli("--output", "json", "repair", ws / "wf.yaml", first, "--db", db)
    assert same.exit_code == 0, same.stdout + same.stderr
    assert _ledger(ws) == ["a"]  # unchanged code: reused, not run again

    (ws / "steps.py").write_text((ws / "steps.py").read_text().replace("echo a", "echo b"))
    repaired = cli("--output", "json", "repair", ws / "wf.yaml", first, "--db", db)
    assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
    assert _ledger(ws) == ["a", "b"]  # the changed function ran again
