"""The Runtime methods the commands call instead of reaching past the door (issue 31):
each typed record's ``to_json()`` is the document the engine's own function gives, so the
commands print what they printed when they called it themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentctl

PROVIDERS = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: providers}
spec:
  policy: {approval: never, networkAllowlist: [127.0.0.1], processAllowlist: [cat]}
  providers:
    remote:
      kind: openai
      endpoint: http://127.0.0.1:9/v1/responses
      credential: {env: AGENTCTL_DOOR_KEY}
      headers: {X-Team: {env: AGENTCTL_DOOR_TEAM}}
    local: {kind: command, command: cat, env: {TOKEN: {env: AGENTCTL_DOOR_KEY}}}
    scripted: {kind: fake}
  agents:
    a: {provider: remote, model: small, instructions: hi}
    b: {provider: local, model: any, instructions: hi}
    c: {provider: scripted, model: scripted, instructions: hi}
  tasks:
    - {id: one, uses: "agent:a", with: {prompt: hello}}
    - {id: two, uses: "agent:b", with: {prompt: hello}}
    - {id: three, uses: "agent:c", with: {prompt: hello}}
"""

FAILING = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: failing}
spec:
  policy: {approval: never, writableRoots: [out]}
  providers:
    scripted: {kind: fake}
  agents:
    writer: {provider: scripted, model: scripted, instructions: say hello}
  actions:
    put: {kind: builtin.write}
    check: {kind: builtin.assert}
  tasks:
    - {id: hello, uses: "agent:writer", with: {prompt: hi}}
    - id: save
      uses: action:put
      needs: [hello]
      with: {path: out/a.txt, content: "${{ tasks.hello.output.text }}"}
    - {id: verify, uses: "action:check", needs: [save], with: {that: false, message: no}}
"""


def test_check_credentials_gives_the_engine_document_of_every_kind_of_provider(
    write_workflow: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentctl.engine.core.preflight import check_credentials

    monkeypatch.setenv("AGENTCTL_DOOR_KEY", "sk-door-secret")
    monkeypatch.setenv("AGENTCTL_DOOR_TEAM", "blue")
    path = write_workflow(PROVIDERS)
    checks = agentctl.Runtime.check_credentials(path)
    assert [check.provider for check in checks] == ["remote", "local", "scripted"]
    remote, local, scripted = checks
    assert remote.endpoint == "http://127.0.0.1:9/v1/responses"
    assert remote.credential is not None and remote.credential["source"] == "env:AGENTCTL_DOOR_KEY"
    assert set(remote.headers) == {"X-Team"}
    assert local.command == "cat" and local.prompt_via == "stdin" and set(local.env) == {"TOKEN"}
    assert scripted.endpoint is None and scripted.command is None and scripted.credential is None
    # Byte for byte, keys in the same order: what `auth check --output json` printed.
    engine = check_credentials(str(path))
    assert [json.dumps(check.to_json()) for check in checks] == [json.dumps(e) for e in engine]
    assert "sk-door-secret" not in json.dumps([check.to_json() for check in checks])


def test_a_smoke_answer_is_kept_with_its_check() -> None:
    from agentctl.runtime_views import ProviderCheck, ProviderSmoke

    document = {
        "provider": "remote",
        "kind": "openai",
        "api": "responses",
        "capabilities": ["text"],
        "endpoint": "http://127.0.0.1:9/v1/responses",
        "credential": None,
        "headers": {},
        "smoke": {"seconds": 0.25, "finishReason": "complete"},
    }
    check = ProviderCheck.from_json(document)
    assert check.smoke == ProviderSmoke(0.25, "complete")
    assert json.dumps(check.to_json()) == json.dumps(document)


def test_recap_is_the_summary_and_next_steps_the_engine_reads(
    write_workflow: Any, tmp_path: Path
) -> None:
    from agentctl.engine.next_steps import for_run
    from agentctl.engine.summary import run_summary
    from agentctl.store.engine import open_store

    db = tmp_path / "runs.db"
    runtime = agentctl.Runtime(db)
    result = runtime.roll(write_workflow(FAILING))
    assert result.state == "failed"
    recap = runtime.recap(result.run_id)
    with open_store(str(db), create=False) as store:
        summary, steps = run_summary(store, result.run_id), for_run(store, result.run_id)
    assert json.dumps(recap.totals.to_json()) == json.dumps(summary)
    assert recap.next == steps and recap.next  # a failed run has next steps
    assert recap.totals.tasks == agentctl.TaskTotals(done=3, total=3, failed=1)
    assert recap.totals.text().startswith("failed after ")
    assert ": 3/3 tasks (1 failed), 2 effects, 2 tokens" in recap.totals.text()
    assert recap.hint() is not None and f"agentctl inspect {result.run_id}" in recap.hint()


def test_recap_of_an_unknown_run_is_a_named_error(tmp_path: Path, write_workflow: Any) -> None:
    runtime = agentctl.Runtime(tmp_path / "runs.db")
    runtime.roll(write_workflow(FAILING))
    with pytest.raises(agentctl.NotFoundError):
        runtime.recap("run-nope")


def test_totals_without_tokens_or_cost_leave_their_keys_out() -> None:
    totals = agentctl.RunTotals(
        state="succeeded", duration_seconds=61.5, tasks=agentctl.TaskTotals(2, 2, 0), effects=1
    )
    assert totals.to_json() == {
        "state": "succeeded",
        "durationSeconds": 61.5,
        "tasks": {"done": 2, "total": 2, "failed": 0},
        "effects": 1,
    }
    assert totals.text() == "succeeded in 1m01s: 2/2 tasks, 1 effect"


def test_resolve_workflow_takes_a_path_as_given_and_a_name_from_the_registry(
    workspace: Path, write_workflow: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)
    (workspace / "workflows").mkdir()
    write_workflow(FAILING, "workflows/failing.yaml")
    assert agentctl.Runtime.resolve_workflow("elsewhere/x.yaml") == "elsewhere/x.yaml"
    assert Path(agentctl.Runtime.resolve_workflow("failing")).name == "failing.yaml"
    with pytest.raises(agentctl.UsageError) as raised:
        agentctl.Runtime.resolve_workflow("nothing-by-this-name")
    assert raised.value.code == "workflow.not_found"
