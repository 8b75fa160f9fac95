"""An omitted key means what the spec's model declares, in the compiler and the engine.

The compiler reads a dump without defaults and the engine a stored document, so each
reads an omitted key's default from the model (``SpecModel.default_of``). Each test
changes a model's declared default and checks the consumer follows it: a literal copy of
the default in the compiler or the engine would not.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentctl.engine.actions.embedding import build_embedder
from agentctl.engine.core.workspace_check import check_workspace
from agentctl.engine.effects.approval_policy import needs_approval, non_interactive_mode
from agentctl.spec.models_common import SpecModel
from agentctl.spec.models_definitions import Tool
from agentctl.spec.models_policy import Compensation, Policy
from agentctl.spec.models_runtime import Embedding, Runtime
from agentctl.spec.models_tasks import Foreach, Task

from .helpers import compile_spec

SPEC = """\
tools:
  write_note:
    kind: builtin.workspace.write
    description: Write a note.
    inputSchema: { type: object, properties: {}, required: [], additionalProperties: false }
    outputSchema: { type: object }
    capability: filesystem.write
    risk: medium
    effectClass: workspace_mutate
    retrySafe: true
    timeoutSeconds: 10
    idempotency: idempotent
actions:
  set: { kind: builtin.assign }
  save: { kind: builtin.write }
tasks:
  - id: w
    uses: action:save
    with: { path: out.txt, content: x }
    compensate: { uses: action:save, with: { path: out.txt, content: "" } }
  - id: a
    uses: action:set
  - id: each
    uses: action:set
    foreach: { items: [1, 2] }
    with: { value: "${{ vars.entry }}" }
"""


def _built_schemas() -> None:
    """Import every spec module and complete every model's schema before a default changes.

    pydantic copies a field's default into the schema of each model that embeds it when
    that schema is built. A schema first built while a test had changed a default would
    keep the changed default for the rest of the process (other tests in this worker would
    see it), so all of them are built first, with the declared defaults.
    """
    import agentctl.spec

    for module in pkgutil.walk_packages(agentctl.spec.__path__, "agentctl.spec."):
        importlib.import_module(module.name)
    models: list[type[BaseModel]] = [SpecModel]
    while models:
        model = models.pop()
        if not model.__pydantic_complete__:
            model.model_rebuild()
        models.extend(model.__subclasses__())
    compile_spec(SPEC)


def _declare(
    monkeypatch: pytest.MonkeyPatch, model: type[SpecModel], name: str, value: Any
) -> None:
    _built_schemas()
    monkeypatch.setattr(model.model_fields[name], "default", value)


def test_the_default_is_the_models() -> None:
    assert Runtime.default_of("max_concurrency") == 1
    assert Foreach.default_of("as_") == "item"
    assert Embedding.default_of("dimensions") == 64


def test_the_compiler_takes_omitted_keys_from_the_spec_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _declare(monkeypatch, Runtime, "max_concurrency", 3)
    _declare(monkeypatch, Runtime, "default_timeout_seconds", 45)
    _declare(monkeypatch, Task, "failure", "continue")
    _declare(monkeypatch, Foreach, "as_", "entry")
    _declare(monkeypatch, Tool, "approval", "always")
    _declare(monkeypatch, Policy, "approval", "never")
    _declare(monkeypatch, Compensation, "approval", "always")
    result = compile_spec(SPEC)
    assert result.plan is not None, [d.to_json() for d in result.diagnostics]
    plan = result.plan
    assert plan.max_concurrency == 3
    assert (plan.tasks["a"].timeout_seconds, plan.tasks["a"].failure) == (45, "continue")
    assert plan.requirements.tools[0].approval == "always"
    approvals = {e.operation: e.approval_possible for e in plan.requirements.effects}
    # Policy approval `never` for the task's effect; compensation `always` asks anyway.
    assert approvals == {"builtin.write": False, "compensate:builtin.write": True}
    children = [task for task in plan.tasks.values() if task.id.startswith("each--")]
    assert [child.vars["entry"] for child in children] == [1, 2]


def test_the_engine_takes_omitted_keys_from_the_spec_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert needs_approval({}, effect_class="external_mutate", risk="medium")
    _declare(monkeypatch, Policy, "approval", "never")
    assert not needs_approval({}, effect_class="external_mutate", risk="medium")
    assert non_interactive_mode({}) == "pause"
    _declare(monkeypatch, Policy, "non_interactive", "fail")
    assert non_interactive_mode({}) == "fail"
    assert non_interactive_mode({"nonInteractive": "deny_approval"}) == "deny_approval"
    _declare(monkeypatch, Embedding, "dimensions", 16)
    assert build_embedder({}, {}, environ={}).dimensions == 16
    (tmp_path / "root").mkdir()
    _declare(monkeypatch, Policy, "workspace_root", "root")
    root, _ = check_workspace({}, tmp_path, None)
    assert root == (tmp_path / "root").resolve()
