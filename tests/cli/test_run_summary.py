"""`roll` and `resume` end with the run's outputs and a one-line summary: state,
duration, tasks done of total, effects, and tokens when a provider reported them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

OUTPUTS = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: outs}
spec:
  policy: {approval: never}
  providers: {scripted: {kind: fake}}
  agents:
    talker:
      provider: scripted
      model: scripted
      instructions: answer
      maxOutputTokens: 32
      providerOptions: {finalText: done}
  actions:
    set: {kind: builtin.assign}
  tasks:
    - {id: a, uses: action:set, with: {x: 1}}
    - {id: talk, uses: 'agent:talker', with: {prompt: one}}
  outputs:
    said: "${{ tasks.talk.output.text }}"
    count: "${{ tasks.a.output.output }}"
"""

ASK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: asking}
spec:
  actions:
    ask: {kind: builtin.ask}
  tasks:
    - {id: env, uses: action:ask, with: {prompt: "Where?"}}
  outputs:
    where: "${{ tasks.env.output.answer }}"
"""


def test_roll_prints_outputs_then_the_summary(cli: Any, tmp_path: Path) -> None:
    workflow = tmp_path / "outs.yaml"
    workflow.write_text(OUTPUTS)
    db = tmp_path / "r.db"
    result = cli("roll", workflow, "--db", db)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "outputs:"
    assert sorted(lines[1:3]) == ['  count: {"x": 1}', "  said: done"]
    assert re.fullmatch(
        r"run-\S+ succeeded in \d+\.\ds: 2/2 tasks, 1 effect, 2 tokens", lines[3]
    ), lines[3]
    data = cli("--output", "json", "roll", workflow, "--db", db).json()["data"]
    summary = data["summary"]
    assert summary["state"] == "succeeded" and summary["tokens"] == 2
    assert summary["tasks"] == {"done": 2, "total": 2, "failed": 0}
    assert summary["effects"] == 1 and summary["durationSeconds"] >= 0


def test_resume_ends_with_the_summary_too(cli: Any, tmp_path: Path) -> None:
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(ASK)
    db = tmp_path / "r.db"
    paused = cli("roll", workflow, "--db", db)
    assert paused.exit_code == 3
    assert re.match(r"run-\S+ paused after \d+\.\ds: 0/1 tasks, 0 effects", paused.stdout)
    data = cli("--output", "json", "runs", "list", "--db", db).json()["data"]
    run_id = data["runs"][0]["runId"]
    question = cli("--output", "json", "approvals", "list", "--db", db).json()["data"]
    cli("approvals", "answer", question["approvals"][0]["approvalId"], "north", "--db", db)
    done = cli("resume", run_id, "--db", db)
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["outputs:", "  where: north"]
    assert re.fullmatch(
        rf"{run_id} succeeded in \d+\.\ds: 1/1 tasks, 0 effects", done.stdout.splitlines()[2]
    )
