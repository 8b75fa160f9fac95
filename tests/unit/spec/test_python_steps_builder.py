"""`@workflow.step` and Python durations (docs/python-steps.md): a function compiles to a
`python.function` action and task, and its source is part of the task's fingerprint."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from agentctl.compiler import compile_workflow
from agentctl.spec import load_workflow
from agentctl.spec.python_api import duration_seconds, retry, task

DEFINITION = """
from agentctl.spec.python_api import WorkflowBuilder

workflow = WorkflowBuilder("release").policy(approval="never")


@workflow.step(timeout="5m", retry=3, with_={"version": "1.0"})
def build(ctx, inputs):
    return {"built": inputs["version"]}


@workflow.step(id="ship-it", needs=["build"], idempotency="at_most_once")
def ship(ctx, inputs):
    return {"shipped": %(shipped)s}
"""


def _load(tmp_path: Path, shipped: str = "True") -> Any:
    path = tmp_path / "release.py"
    path.write_text(dedent(DEFINITION % {"shipped": shipped}))
    loaded = load_workflow(path)
    assert loaded.document is not None, [d.to_json() for d in loaded.diagnostics]
    return loaded


def test_a_step_compiles_to_a_function_action_and_its_task(tmp_path: Path) -> None:
    loaded = _load(tmp_path)  # a step named `build` is not taken for a build() function
    spec = loaded.document.model_dump(by_alias=True, exclude_none=True)["spec"]
    build = spec["actions"]["build"]
    assert build["kind"] == "python.function"
    assert build["function"] == "release.py:build"
    assert build["sourceDigest"].startswith("sha256:")
    assert spec["actions"]["ship-it"]["idempotency"] == "at_most_once"
    tasks = {t["id"]: t for t in spec["tasks"]}
    assert tasks["build"]["uses"] == "action:build"
    assert tasks["build"]["timeoutSeconds"] == 300
    assert tasks["build"]["retry"]["maxAttempts"] == 3
    assert tasks["build"]["with"] == {"version": "1.0"}
    assert tasks["ship-it"]["needs"] == ["build"]


def test_changed_code_changes_only_that_steps_fingerprint(tmp_path: Path) -> None:
    def fingerprints(shipped: str) -> dict[str, str]:
        result = compile_workflow(_load(tmp_path, shipped).document)
        assert result.plan is not None
        return {tid: t.definition_fingerprint for tid, t in result.plan.tasks.items()}

    before, after = fingerprints("True"), fingerprints("'yes'")
    assert before["build"] == after["build"]
    assert before["ship-it"] != after["ship-it"]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (300, 300),
        (1.5, 1.5),
        ("5m", 300),
        ("1m30s", 90),
        ("2h", 7200),
        ("1d", 86400),
        ("250ms", 0.25),
        (timedelta(minutes=5), 300),
    ],
)
def test_durations_become_numbers(value: Any, seconds: float) -> None:
    assert duration_seconds(value) == seconds


def test_durations_in_the_builders_fields() -> None:
    assert task("t", uses="action:a", timeout_seconds="2m")["timeoutSeconds"] == 120
    assert retry(2, backoff_ms="1.5s")["backoffMs"] == 1500
    with pytest.raises(ValueError, match="5 minutes"):
        duration_seconds("5 minutes")


def test_yaml_stays_strict(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(
        dedent(
            """
            apiVersion: agentctl.dev/v1
            kind: Workflow
            metadata: {name: strict}
            spec:
              actions: {set: {kind: builtin.assign}}
              tasks: [{id: t, uses: "action:set", timeoutSeconds: "5m"}]
            """
        )
    )
    loaded = load_workflow(path)
    assert loaded.document is None
    assert any("timeoutSeconds" in (d.path or "") for d in loaded.diagnostics)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"kind": "python.function"}, "requires `function: module:callable`"),
        ({"kind": "python.function", "function": "../up.py:f"}, "under the workflow's folder"),
        (
            {"kind": "python.function", "function": "m:f", "command": "sh"},
            "do not apply to python.function",
        ),
        ({"kind": "builtin.assign", "function": "m:f"}, "only apply to python.function"),
    ],
)
def test_function_action_rules(tmp_path: Path, action: dict[str, Any], message: str) -> None:
    from agentctl.spec.models_definitions import Action

    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("`", "`")):
        Action.model_validate(action)
