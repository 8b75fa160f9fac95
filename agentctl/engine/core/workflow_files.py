"""A workflow file compiled the way ``check``, ``plan`` and ``auth check`` need it.

Loading, the variables of ``--vars-file``/``--var``, compiling and, with a workspace, the
checks of its paths there: every diagnostic together, or one ``ValidationError`` (exit 2)
that carries them all. No state is read or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentctl.errors import ValidationError

if TYPE_CHECKING:
    from agentctl.compiler import Plan
    from agentctl.diagnostics import Diagnostic

__all__ = ["compile_workflow_file", "compile_workflow_with_inputs", "task_isolation"]


def compile_workflow_file(
    workflow: str,
    workspace: str | None = None,
    vars_files: list[str] | None = None,
    var_pairs: list[str] | None = None,
) -> tuple[Plan, list[Diagnostic]]:
    """Load and compile ``workflow`` with its variables; with ``workspace``, also check its
    paths there."""
    plan, diagnostics, _ = compile_workflow_with_inputs(workflow, workspace, vars_files, var_pairs)
    return plan, diagnostics


def compile_workflow_with_inputs(
    workflow: str,
    workspace: str | None = None,
    vars_files: list[str] | None = None,
    var_pairs: list[str] | None = None,
    input_pairs: list[str] | None = None,
) -> tuple[Plan, list[Diagnostic], dict[str, Any]]:
    """As :func:`compile_workflow_file`, also checking ``--input`` pairs against the
    workflow's declared inputs the way `roll` does (exit 2 naming the declared ones);
    returns the parsed overrides too."""
    from agentctl.compiler import compile_workflow
    from agentctl.spec import load_workflow
    from agentctl.spec.inputs import parse_input_pairs, require_declared_inputs
    from agentctl.spec.loader import require_workflow_file
    from agentctl.spec.vars_files import load_variables

    require_workflow_file(workflow)
    loaded = load_workflow(workflow)
    diagnostics = list(loaded.diagnostics)
    if not loaded.ok or loaded.document is None:
        raise ValidationError(
            f"{workflow} is not a valid workflow ({sum(d.is_error for d in diagnostics)} error(s))",
            code="workflow.invalid",
            diagnostics=diagnostics,
            hint="fix the diagnostics above; `agentctl schema` prints the JSON Schema",
        )
    overrides = parse_input_pairs(input_pairs or [])
    require_declared_inputs(loaded.document.spec.inputs, overrides)
    layers, problems = load_variables(
        loaded, vars_files=vars_files or (), var_pairs=var_pairs or ()
    )
    diagnostics.extend(problems)
    compiled = compile_workflow(loaded.document, source=loaded.source, variables=layers)
    diagnostics.extend(compiled.diagnostics)
    if workspace is not None:
        from agentctl.engine.core.workspace_check import check_workspace

        spec = loaded.document.model_dump(mode="json", by_alias=True)["spec"]
        _, found = check_workspace(spec, Path(workspace), loaded.source)
        diagnostics.extend(found)
    if not compiled.ok or compiled.plan is None or any(d.is_error for d in diagnostics):
        raise ValidationError(
            f"{workflow} does not compile ({sum(d.is_error for d in diagnostics)} error(s))",
            code="workflow.invalid",
            diagnostics=diagnostics,
            hint="fix the diagnostics above and run `agentctl check` again",
        )
    return compiled.plan, diagnostics, overrides


def task_isolation(workflow: str, plan: Plan) -> dict[str, dict[str, Any]]:
    """How each process task of ``plan`` will run (``plan`` shows it): task id ->
    ``{isolation, sandbox?, text}``; tasks that start no process (neither a process action
    nor an agent on a ``kind: command`` provider) are absent."""
    from agentctl.engine.core import isolation
    from agentctl.spec import load_workflow
    from agentctl.spec.models_definitions import PROCESS_ACTION_KINDS

    loaded = load_workflow(workflow)
    if loaded.document is None:
        return {}
    spec = loaded.document.model_dump(mode="json", by_alias=True)["spec"]
    actions = spec.get("actions") or {}
    found: dict[str, dict[str, Any]] = {}
    for task_id in plan.order:
        task = plan.tasks[task_id]
        if task.uses.kind == "agent":
            action = isolation.agent_cli(spec, str(task.uses.name))
        elif task.uses.kind == "action":
            action = actions.get(str(task.uses.name))
            if action and action.get("kind") not in PROCESS_ACTION_KINDS:
                action = None
        else:
            action = None
        if not action:
            continue
        entry: dict[str, Any] = {
            "isolation": isolation.declared_level(action),
            "text": isolation.describe(action),
        }
        settings = isolation.sandbox_settings(action)
        if settings is not None:
            entry["sandbox"] = settings.to_json()
        found[task_id] = entry
    return found
