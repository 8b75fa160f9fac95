"""``agentctl check``, ``plan`` and ``schema``: authoring without any state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.graphs import GraphFormat, plan_graph, uses_text
from agentctl.cli.options import VarOption, VarsFileOption
from agentctl.errors import UsageError

WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        help="Directory the workflow will run in (as for `roll`); its action cwd and "
        "instructionsFile paths are checked there.",
    ),
]


def check_command(
    workflow: Annotated[str, typer.Argument(help="Workflow file (.yaml, .yml, .json or .py).")],
    workspace: WorkspaceOption = None,
    var_pairs: VarOption = None,
    vars_files: VarsFileOption = None,
) -> None:
    """Parse, validate and compile a workflow; exit 2 with located diagnostics if invalid.

    Example: agentctl check deploy.yaml --workspace ./checkout --var replicas=3
    """
    from agentctl.runtime import Runtime

    compiled = Runtime.compile(
        workflow, workspace=workspace, vars_files=vars_files or (), var_pairs=var_pairs or ()
    )
    plan, diagnostics = compiled.plan, list(compiled.diagnostics)
    data: dict[str, Any] = {
        "valid": True,
        "workflow": plan.workflow_name,
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "tasks": len(plan.order),
    }
    if workspace is not None:
        data["workspace"] = str(Path(workspace).resolve())
    output.current().success(
        "CheckResult",
        data,
        diagnostics=diagnostics,
        human=f"{workflow}: valid ({plan.workflow_name}, {len(plan.order)} tasks, plan "
        f"{plan.plan_digest[:19]})",
    )


def plan_command(
    workflow: Annotated[str, typer.Argument(help="Workflow file (.yaml, .yml, .json or .py).")],
    input_pairs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            help="KEY=VALUE input override, read and checked like a run's inputs (the plan "
            "shows how each value was read); repeatable.",
        ),
    ] = None,
    graph: Annotated[
        GraphFormat | None,
        typer.Option("--graph", help="Print the task graph as mermaid or dot instead."),
    ] = None,
    workspace: WorkspaceOption = None,
    var_pairs: VarOption = None,
    vars_files: VarsFileOption = None,
) -> None:
    """Print the deterministic compiled plan: order, concurrency, providers, tools, effects.

    Example: agentctl plan deploy.yaml --workspace ./checkout --graph mermaid
    Example: agentctl plan deploy.yaml --vars-file prod.yaml --var 'region="eu-west-1"'
    """
    from agentctl.runtime import Runtime

    compiled = Runtime.compile(
        workflow,
        workspace=workspace,
        vars_files=vars_files or (),
        var_pairs=var_pairs or (),
        input_pairs=input_pairs or (),
        isolation=graph is None,
    )
    plan, diagnostics = compiled.plan, list(compiled.diagnostics)
    overrides = dict(compiled.input_overrides)
    out = output.current()
    if graph is not None:
        text = plan_graph(plan, graph.value)
        if out.machine:
            out.success(
                "PlanGraph", {"format": graph.value, "graph": text}, diagnostics=diagnostics
            )
        else:
            out.stdout.write(text)
            out.emitted = True
        return
    data = plan.to_json()
    isolation = compiled.isolation
    if isolation:
        data["isolation"] = dict(isolation)
    readings = compiled.inputs_read_as
    if overrides:
        data["inputOverrides"] = overrides
        data["inputsReadAs"] = dict(readings)
    if workspace is not None:
        data["workspace"] = str(Path(workspace).resolve())

    def human() -> None:
        effects = plan.requirements.effects
        print(
            f"plan {plan.workflow_name}  {len(plan.order)} tasks, maxConcurrency "
            f"{plan.max_concurrency}, {plan.predictability}",
            file=out.stdout,
        )
        print(f"  workflow {plan.workflow_digest}\n  plan     {plan.plan_digest}", file=out.stdout)
        for index, task_id in enumerate(plan.order):
            task = plan.tasks[task_id]
            needs = f"  needs {', '.join(task.needs)}" if task.needs else ""
            declared = [e.operation for e in effects if e.task == task_id]
            effect_text = f"  effects {', '.join(declared)}" if declared else ""
            print(
                f"  {index + 1:>4}. {task_id}  [{uses_text(task)}]{needs}{effect_text}",
                file=out.stdout,
            )
            if task_id in isolation:
                print(f"        isolation {isolation[task_id]['text']}", file=out.stdout)
        for provider in plan.requirements.providers:
            print(
                f"  provider {provider.name} ({provider.kind}): {', '.join(provider.required)}",
                file=out.stdout,
            )
        for tool in plan.requirements.tools:
            print(
                f"  tool {tool.name} ({tool.kind}) {tool.effect_class}, risk {tool.risk}, "
                f"approval {tool.approval}",
                file=out.stdout,
            )
        print(f"  declared effects: {len(effects)}", file=out.stdout)
        for name, value in overrides.items():
            print(f"  input {name} = {json.dumps(value)}  ({readings[name]})", file=out.stdout)

    out.success("Plan", data, diagnostics=diagnostics, human=human)


def schema_command(
    write: Annotated[
        str | None,
        typer.Option("--write", help="Write the schema to this file instead of printing it."),
    ] = None,
) -> None:
    """Print the JSON Schema of the workflow format (generated from the models).

    Example: agentctl schema > workflow.schema.json
    """
    from agentctl.spec import workflow_json_schema

    schema = workflow_json_schema()
    out = output.current()
    if write is not None:
        target = Path(write)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {exc.strerror}") from exc
        out.success("Schema", {"path": str(target)}, human=f"wrote {target}")
        return
    if out.machine:
        out.success("Schema", schema)
    else:
        out.stdout.write(json.dumps(schema, indent=2) + "\n")
        out.emitted = True
