"""``agentctl explain``: each variable's value and its source, per task."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer

from agentctl.cli import output
from agentctl.cli.options import VarOption, VarsFileOption

_LAYER_NAMES = {
    "spec.varsFiles": "spec.varsFiles",
    "spec.vars": "spec.vars",
    "agent.varsFiles": "agent varsFiles",
    "agent.vars": "agent vars",
    "task.varsFiles": "task varsFiles",
    "task.vars": "task vars",
    "--vars-file": "--vars-file",
    "--var": "--var",
    "recorded": "recorded",
}


def _where(source: dict[str, Any]) -> str:
    if source.get("flag"):
        return str(source["flag"])
    where = str(source.get("file") or "<workflow>")
    for key in ("line", "column"):
        if source.get(key) is not None:
            where += f":{source[key]}"
    return f"{where} ({_LAYER_NAMES.get(source['layer'], source['layer'])})"


def _lines(variables: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for variable in variables:
        value = json.dumps(variable["value"], ensure_ascii=False)
        line = f"    {variable['name']} = {value}  from {_where(variable['source'])}"
        if variable["replaced"]:
            first = variable["replaced"][0]
            line += (
                f"; replaces {json.dumps(first['value'], ensure_ascii=False)} from "
                f"{_where(first['source'])}"
            )
        lines.append(line)
    return lines or ["    (no variables)"]


def explain_command(
    workflow: Annotated[str, typer.Argument(help="Workflow file (.yaml, .yml, .json or .py).")],
    var_pairs: VarOption = None,
    vars_files: VarsFileOption = None,
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace",
            help="Directory the workflow will run in (as for `roll`); its action cwd and "
            "instructionsFile paths are checked there, as `check --workspace` does.",
        ),
    ] = None,
) -> None:
    """Show each variable's resolved value and where it came from (file:line or flag).

    Precedence, lowest first: spec.varsFiles, spec.vars, the agent's varsFiles and vars,
    the task's varsFiles and vars, --vars-file, --var. A higher layer replaces the whole
    value. Pass the same --var/--vars-file flags you will give `roll`.

    Example: agentctl explain deploy.yaml --vars-file prod.yaml --var replicas=5
    Example: agentctl explain deploy.yaml --workspace ./checkout
    """
    from agentctl.runtime import Runtime

    explained = Runtime.explain(
        workflow, vars_files=vars_files or (), var_pairs=var_pairs or (), workspace=workspace
    )
    out = output.current()

    def human() -> None:
        print(f"{explained.workflow}  plan {explained.plan_digest}", file=out.stdout)
        print("  every task:", file=out.stdout)
        for line in _lines(explained.variables):
            print(line, file=out.stdout)
        for scope in explained.tasks:
            agent = f" (agent {scope['agent']})" if scope.get("agent") else ""
            print(f"  task {scope['task']}{agent}:", file=out.stdout)
            for line in _lines(scope["variables"]):
                print(line, file=out.stdout)

    out.success(
        "Explanation",
        explained.to_json(),
        diagnostics=list(explained.diagnostics),
        human=human,
    )
