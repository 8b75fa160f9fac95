"""``agentctl explain``: every variable's resolved value and where it came from.

The workflow is compiled exactly as ``check`` compiles it (same files, same flags), so an
explanation is only given for a workflow that would run; its digests are the ones a run
created with the same flags would record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentctl.compiler import compile_workflow
from agentctl.errors import ValidationError
from agentctl.spec import load_workflow
from agentctl.spec.vars_files import load_variables, variable_scopes

__all__ = ["explain_workflow"]


def explain_workflow(
    workflow_path: str,
    *,
    vars_files: Sequence[str] = (),
    var_pairs: Sequence[str] = (),
    workspace: str | None = None,
) -> dict[str, Any]:
    """``{workflow, workflowDigest, planDigest, variables, tasks}`` for ``workflow_path``.

    ``variables`` is the scope every task shares (workflow layers and the invocation);
    ``tasks`` adds, per task definition, its agent and task layers. Each variable lists its
    value, its winning source and the lower values it replaced. With ``workspace`` the
    workflow is also checked against that directory, as `check --workspace` does."""
    loaded = load_workflow(workflow_path)
    diagnostics = list(loaded.diagnostics)
    if not loaded.ok or loaded.document is None:
        raise ValidationError(
            f"{workflow_path} is not a valid workflow "
            f"({sum(d.is_error for d in diagnostics)} error(s))",
            code="workflow.invalid",
            diagnostics=diagnostics,
            hint="fix the diagnostics above; `agentctl schema` prints the JSON Schema",
        )
    layers, problems = load_variables(loaded, vars_files=vars_files, var_pairs=var_pairs)
    diagnostics.extend(problems)
    compiled = compile_workflow(loaded.document, source=loaded.source, variables=layers)
    diagnostics.extend(compiled.diagnostics)
    if workspace is not None:
        from pathlib import Path

        from agentctl.engine.core.workspace_check import check_workspace

        document = loaded.document.model_dump(mode="json", by_alias=True)
        _, found = check_workspace(document["spec"], Path(workspace), loaded.source)
        diagnostics.extend(found)
    if compiled.plan is None or any(d.is_error for d in diagnostics):
        raise ValidationError(
            f"{workflow_path} does not compile ({sum(d.is_error for d in diagnostics)} error(s))",
            code="workflow.invalid",
            diagnostics=diagnostics,
            hint="fix the diagnostics above and run `agentctl explain` again",
        )
    spec = loaded.document.model_dump(mode="json", by_alias=True, exclude_unset=True)["spec"]
    explained: dict[str, Any] = {
        "workflow": compiled.plan.workflow_name,
        "workflowDigest": compiled.plan.workflow_digest,
        "planDigest": compiled.plan.plan_digest,
        "variables": [v.to_json() for v in layers.resolve(None, None)],
        "tasks": variable_scopes(spec, layers),
        "diagnostics": diagnostics,
    }
    if workspace is not None:
        from pathlib import Path

        explained["workspace"] = str(Path(workspace).resolve())
    return explained
