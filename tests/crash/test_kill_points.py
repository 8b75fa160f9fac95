"""The crash suite: SIGKILL a real `agentctl roll` at every fault point, then recover.

For every fault point and four workflows (sequential mutations, a parallel foreach, an
approval inside a loop, a function step whose ctx calls are the effects) a real
subprocess is killed where ``AGENTCTL_FAULT`` says. The test then plays the operator:
resume; for every uncertain effect look at the outside world (the ledger file the shell
steps append to, the files the writes produce) and reconcile it applied or not applied;
approve pending approvals; resume again. It asserts:

- no confirmed effect ran twice (every ledger tag appears exactly once),
- every started-but-unconfirmed effect became ``uncertain`` rather than being redone,
- ``PRAGMA integrity_check`` is ok and the audit chain verifies,
- the final outputs equal those of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.faults import FAULT_POINTS
from tests.crash.cli import cli, result_json

pytestmark = pytest.mark.crash

SEQUENTIAL = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: sequential-mutations}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    append-a: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo a >> ledger.txt"]}
    append-b: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo b >> ledger.txt"]}
    save: {kind: builtin.write}
    remember: {kind: builtin.memory.write}
    set: {kind: builtin.assign}
  tasks:
    - {id: one, uses: "action:append-a"}
    - id: two
      uses: action:save
      needs: [one]
      with: {path: out/two.txt, content: "after a"}
    - id: three
      uses: action:remember
      needs: [two]
      with: {key: written, value: "${{ tasks.two.output.path }}"}
    - {id: four, uses: "action:append-b", needs: [three]}
    - id: five
      uses: action:set
      needs: [four]
      with: {memory: "${{ memory.written }}", exit: "${{ tasks.four.output.exitCode }}"}
"""

FOREACH = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: parallel-foreach}
spec:
  runtime: {maxConcurrency: 4}
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    mark:
      kind: builtin.shell.exec
      command: sh
      args: ["-c", "mkdir -p ledger.d && mktemp ledger.d/run.XXXXXX > /dev/null"]
    set: {kind: builtin.assign}
  tasks:
    - id: fan
      uses: action:mark
      foreach: {items: [p, q, r, s, t, u], as: tag}
    - id: join
      uses: action:set
      needs: [fan]
      with: {items: "${{ tasks.fan.output.items }}"}
"""

LOOP = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: approval-in-loop}
spec:
  policy: {approval: mutations, processAllowlist: [sh], writableRoots: [out]}
  actions:
    save: {kind: builtin.write}
  tasks:
    - id: rounds
      uses: action:save
      loop:
        maxIterations: 3
        while: "${{ vars.loopIndex < 3 }}"
      with:
        path: "out/round-${{ vars.loopIndex }}.txt"
        content: "round ${{ vars.loopIndex }}"
"""

FUNCTION = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: function-step}
spec:
  policy: {approval: never, processAllowlist: [sh], writableRoots: [out]}
  actions:
    both: {kind: python.function, function: "steps:both"}
    set: {kind: builtin.assign}
  tasks:
    - {id: step, uses: "action:both"}
    - {id: after, uses: "action:set", needs: [step], with: {step: "${{ tasks.step.output }}"}}
"""

# A function step: two ctx.shell calls and a ctx.write, each an effect at its position.
STEPS = """
def both(ctx, inputs):
    a = ctx.shell("sh", ["-c", "echo a >> ledger.txt"])
    b = ctx.shell("sh", ["-c", "echo b >> ledger.txt"])
    ctx.write("out/step.txt", "a and b")
    return {"exits": [a["exitCode"], b["exitCode"]]}
"""

WORKFLOWS = {"sequential": SEQUENTIAL, "foreach": FOREACH, "loop": LOOP, "function": FUNCTION}
FILES = {"function": {"steps.py": STEPS}}


def _settle(ws: Path) -> None:
    """Wait until no process works in the workspace any more: a killed executor's children
    (each a single `echo >> ledger` or `mktemp`) finish on their own; the operator looks at
    the outside world only once it has stopped moving."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        busy = False
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cwd = Path(os.readlink(entry / "cwd"))
            except OSError:
                continue
            if cwd == ws or ws in cwd.parents:
                busy = True
                break
        if not busy:
            return
        time.sleep(0.02)


def _executions(ws: Path) -> int:
    """How many `mark` processes ran: each leaves one unique file in ledger.d."""
    return len(list((ws / "ledger.d").glob("run.*"))) if (ws / "ledger.d").exists() else 0


def _ledger(ws: Path) -> list[str]:
    path = ws / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def _operator_step(ws: Path, db: Path, run_id: str) -> None:
    """Look at the outside world and conclude every uncertain effect; approve approvals."""
    inspection = result_json(cli(["inspect", run_id, "--db", str(db)], ws))["data"]
    _settle(ws)
    marks = [e for e in inspection["effects"] if "mktemp" in json.dumps(e["request"])]
    accounted = sum(
        1
        for e in marks
        if (e["status"] == "succeeded" and e["confirmed"])
        or (e["reconciliations"] and e["reconciliations"][-1]["status"] == "applied")
    )
    unexplained = _executions(ws) - accounted
    for effect in inspection["effects"]:
        if effect["status"] not in ("started", "uncertain") or effect["reconciliations"]:
            continue
        request = effect["request"] or {}
        result: Any = {
            "status": "changed",
            "changed": True,
            "exitCode": 0,
            "stdout": "",
            "stderr": "",
        }
        if effect in marks:
            # Identical commands: which child ran does not matter, only how many did.
            applied = unexplained > 0
            unexplained -= 1 if applied else 0
        elif effect["operation"] == "builtin.shell.exec":
            command = " ".join(request.get("args", []))
            applied = ("a" if "echo a" in command else "b") in _ledger(ws)
        elif effect["operation"] == "builtin.write":
            target = ws / request["path"]
            applied = target.exists()
            result = {
                "status": "changed",
                "changed": True,
                "before": None,
                "after": target.read_text() if applied else "",
                "diff": None,
                "path": request["path"],
                "predictability": "fully_predictable",
            }
        else:
            applied = False  # memory writes apply only at the task commit that never came
        args = ["reconcile", effect["effectId"], "--db", str(db), "--reason", "crash suite"]
        if applied:
            (ws / "result.json").write_text(json.dumps(result))
            args += ["--status", "applied", "--result-file", str(ws / "result.json")]
        else:
            args += ["--status", "not-applied"]
        done = cli(args, ws)
        assert done.returncode == 0, done.stderr
    for approval in inspection["approvals"]:
        if approval["status"] == "pending":
            done = cli(
                ["approvals", "approve", approval["approvalId"], "--reason", "ok", "--db", str(db)],
                ws,
            )
            assert done.returncode == 0, done.stderr


def _drive(ws: Path, db: Path, fault: str | None) -> tuple[str, dict[str, Any]]:
    """Roll (maybe killed), then resume and play operator until the run succeeds."""
    env = {"AGENTCTL_FAULT": fault} if fault else {}
    first = cli(["roll", "wf.yaml", "--db", str(db)], ws, env)
    assert first.returncode in (0, 3, -9), first.stderr
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    result = first
    for _ in range(12):
        if result.returncode == 0:
            break
        if result.returncode == 3:
            _operator_step(ws, db, run_id)
        result = cli(["resume", run_id, "--db", str(db)], ws)
        assert result.returncode in (0, 3), result.stderr
    assert result.returncode == 0, result.stderr
    return run_id, result_json(result)["data"]["output"]


def _setup(tmp_path: Path, name: str, label: str) -> tuple[Path, Path]:
    ws = tmp_path / label
    ws.mkdir()
    (ws / "wf.yaml").write_text(textwrap.dedent(WORKFLOWS[name]))
    for file, text in FILES.get(name, {}).items():
        (ws / file).write_text(textwrap.dedent(text))
    return ws, ws / "state" / "runtime.db"


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Each workflow run once without faults: the outputs and world a crash must reach."""
    out = {}
    for name in WORKFLOWS:
        ws, db = _setup(tmp_path_factory.mktemp("baseline"), name, name)
        out[name] = (ws, _drive(ws, db, None)[1])
    return out


# The function step at the second pass of each point only: its first effect is then
# confirmed, the case the re-run from the top must not repeat (the suite's time budget).
CASES = [
    (name, fault, nth)
    for nth in (1, 2)
    for fault in FAULT_POINTS
    for name in sorted(WORKFLOWS)
    if name != "function" or nth == 2
]


@pytest.mark.parametrize(("name", "fault", "nth"), CASES)
def test_kill_at_fault_point_then_recover(
    tmp_path: Path, baselines: dict[str, tuple[Path, Any]], name: str, fault: str, nth: int
) -> None:
    base_ws, expected = baselines[name]

    ws, db = _setup(tmp_path, name, "crashed")
    run_id, output = _drive(ws, db, f"{fault}:{nth}")
    assert output == expected

    ledger = (ws / "ledger.txt").read_text().splitlines() if (ws / "ledger.txt").exists() else []
    baseline_ledger = (
        (base_ws / "ledger.txt").read_text().splitlines()
        if (base_ws / "ledger.txt").exists()
        else []
    )
    assert sorted(ledger) == sorted(baseline_ledger), "a confirmed effect ran twice"
    assert _executions(ws) == _executions(base_ws), "a foreach process ran twice"
    for path in sorted((base_ws / "out").glob("*")) if (base_ws / "out").exists() else []:
        assert (ws / "out" / path.name).read_text() == path.read_text()

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        statuses = conn.execute(
            "SELECT e.status, e.confirmed, (SELECT COUNT(*) FROM reconciliations r WHERE "
            "r.effect_id = e.id) FROM effects e"
        ).fetchall()
    conn.close()
    for status, confirmed, conclusions in statuses:
        assert status in ("succeeded", "uncertain"), status
        if status == "uncertain":
            assert conclusions >= 1  # never redone silently: an operator concluded it
        else:
            assert confirmed == 1
    verified = cli(["audit", run_id, "--verify", "--db", str(db)], ws)
    assert verified.returncode == 0, verified.stderr


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_a_kill_at_effect_requested_leaves_what_the_approval_mode_decided(
    tmp_path: Path, name: str
) -> None:
    """``effect.requested`` is passed by every effect after its journal's commit. An effect
    that needs no approval was journaled ``started`` there (one commit before its dispatch),
    so a kill leaves what a kill at ``effect.started`` leaves; a gated one (the loop's
    writes, under ``approval: mutations``) is ``requested``, its approval not yet asked."""
    ws, db = _setup(tmp_path, name, "killed")
    killed = cli(["roll", "wf.yaml", "--db", str(db)], ws, {"AGENTCTL_FAULT": "effect.requested"})
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(db) as conn:
        statuses = [s for (s,) in conn.execute("SELECT status FROM effects")]
        approvals = conn.execute("SELECT COUNT(*) FROM approvals").fetchone()[0]
    conn.close()
    # The foreach's parallel children may have journaled more before the kill.
    assert statuses and set(statuses) == ({"requested"} if name == "loop" else {"started"})
    assert approvals == 0


def test_confirmed_memory_write_is_applied_on_resume(tmp_path: Path) -> None:
    """Killed after the memory write's effect confirmed but before its task committed: the
    resumed run reuses the effect and applies the delta in the succeeding transition."""
    ws, db = _setup(tmp_path, "sequential", "memory")
    killed = cli(["roll", "wf.yaml", "--db", str(db)], ws, {"AGENTCTL_FAULT": "effect.finished:3"})
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
        memory_effect = conn.execute(
            "SELECT status, confirmed FROM effects WHERE operation = 'builtin.memory.write'"
        ).fetchone()
    conn.close()
    assert memory_effect == ("succeeded", 1)
    resumed = cli(["resume", run_id, "--db", str(db)], ws)
    assert resumed.returncode == 0, resumed.stderr
    output = result_json(resumed)["data"]["output"]
    assert output["five"]["output"]["memory"] == "out/two.txt"
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM effects WHERE operation = 'builtin.memory.write'"
        ).fetchone()
    conn.close()
    assert count == 1  # reused, not written again
