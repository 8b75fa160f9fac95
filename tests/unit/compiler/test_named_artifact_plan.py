"""Declared named artifacts in the plan: present only when declared, so the plans and
fingerprints of every other workflow stay byte-identical."""

from __future__ import annotations

from pathlib import Path

from agentctl.compiler import Plan, compile_workflow
from agentctl.digest import canonical_json, digest_json
from agentctl.spec.loader import load_workflow

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {{name: plan-artifacts}}
spec:
  policy: {{approval: never, writableRoots: [out], processAllowlist: [sh]}}
  actions:
    make: {{kind: builtin.shell.exec, command: sh, args: ["-c", "true"]}}
  tasks:
    - id: each
      uses: action:make
      foreach: {{items: [a, b, c]}}
{each}
    - id: plain
      uses: action:make
"""


def _plan(tmp_path: Path, each: str) -> Plan:
    path = tmp_path / "wf.yaml"
    path.write_text(WORKFLOW.format(each=each))
    loaded = load_workflow(path)
    assert loaded.document is not None
    result = compile_workflow(loaded.document, source=loaded.source)
    assert result.plan is not None, result.diagnostics
    return result.plan


def test_artifacts_appear_only_when_declared(tmp_path: Path) -> None:
    without = _plan(tmp_path, "")
    declared = _plan(tmp_path, "      artifacts: [{name: report, path: out/report.md}]")
    for task in without.tasks.values():
        assert "artifacts" not in task.to_json()
    children = [t for t in declared.tasks.values() if t.expansion is not None]
    assert len(children) == 3
    for child in children:
        assert child.to_json()["artifacts"] == [{"name": "report", "path": "out/report.md"}]
        # The fast fingerprint path agrees with the canonical record, artifacts included.
        assert child.definition_fingerprint == digest_json(child.definition_json())
        plain = without.tasks[child.id].definition_json()
        assert {k: v for k, v in child.definition_json().items() if k != "artifacts"} == plain
        assert child.definition_fingerprint != without.tasks[child.id].definition_fingerprint
    # A task that declares nothing keeps its exact bytes and fingerprint.
    assert canonical_json(declared.tasks["plain"].to_json()) == canonical_json(
        without.tasks["plain"].to_json()
    )
    again = Plan.from_json(declared.to_json())
    assert again.to_json() == declared.to_json()
    assert digest_json(again.digest_material()) == declared.plan_digest


SESSION = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: plan-session}
spec:
  providers:
    fake: {kind: fake}
  agents:
    helper: {provider: fake, model: scripted, instructions: hi}
  tasks:
    - id: ask
      uses: agent:helper
      session: {from: {run: latest, task: ask}}
    - id: plain
      uses: agent:helper
"""


def test_a_session_is_in_the_plan_and_its_fingerprint_only_when_declared(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(SESSION)
    loaded = load_workflow(path)
    assert loaded.document is not None
    plan = compile_workflow(loaded.document, source=loaded.source).plan
    assert plan is not None
    ask, plain = plan.tasks["ask"], plan.tasks["plain"]
    assert ask.to_json()["session"] == {"from": {"run": "latest", "task": "ask"}}
    assert "session" not in plain.to_json()
    for task in (ask, plain):
        assert task.definition_fingerprint == digest_json(task.definition_json())
    assert Plan.from_json(plan.to_json()).to_json() == plan.to_json()


def test_python_definitions_declare_artifacts_and_sessions() -> None:
    from agentctl.spec.models_tasks import Task
    from agentctl.spec.python_api import task

    body = task(
        "review",
        uses="agent:reviewer",
        artifacts=[{"name": "report", "path": "out/report.md"}],
        session={"name": "reviewer-main"},
    )
    assert body["artifacts"] == [{"name": "report", "path": "out/report.md"}]
    parsed = Task.model_validate(body)
    assert parsed.artifacts is not None and parsed.artifacts[0].name == "report"
    assert parsed.session is not None and parsed.session.name == "reviewer-main"
