"""Workflow variables: the eight layers, where each value came from, and how they merge.

A task reads ``${{ vars.NAME }}``. Its value is chosen from eight layers, lowest first:

1. ``spec.varsFiles`` (in the order listed)      5. the task's ``varsFiles``
2. ``spec.vars``                                  6. the task's ``vars``
3. the task's agent's ``varsFiles``               7. ``--vars-file FILE`` (in order)
4. the task's agent's ``vars``                    8. ``--var KEY=JSON`` (in order)

A higher layer replaces a lower layer's value for the same top-level name as a whole: no
deep merge of objects, no concatenation of lists. Within one layer the later file or flag
wins. Action tasks and routers have no agent layers.

Every value carries a :class:`VarSource` (file and line, or the flag), so ``agentctl
explain`` can say where the winning value came from. Reading the files lives in
:mod:`agentctl.spec.vars_files`; this module holds only data and the merge.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic.dataclasses import dataclass as record

from agentctl.typed_records import CAMEL, CamelRecord, omitted_when

__all__ = [
    "INCLUDE_KEYS",
    "LAYERS",
    "RESERVED_VARIABLES",
    "Layer",
    "ResolvedVariable",
    "VarEntry",
    "VarSource",
    "VariableLayers",
]

RESERVED_VARIABLES = frozenset(
    {"loopIndex", "loopPrevious", "foreachIndex", "matrix", "matrixIndex"}
)
"""Names the engine binds for loops and fan-outs; no variable layer may define them."""

INCLUDE_KEYS = frozenset({"varsFiles", "include", "includes"})
"""Top-level keys refused in a variables file: files cannot include other files."""

Layer = Literal[
    "spec.varsFiles",
    "spec.vars",
    "agent.varsFiles",
    "agent.vars",
    "task.varsFiles",
    "task.vars",
    "--vars-file",
    "--var",
    "recorded",
]
LAYERS: tuple[Layer, ...] = (
    "spec.varsFiles",
    "spec.vars",
    "agent.varsFiles",
    "agent.vars",
    "task.varsFiles",
    "task.vars",
    "--vars-file",
    "--var",
)
"""The layers from lowest to highest precedence (``recorded`` stands in for the last two)."""


@record(frozen=True, slots=True, config=CAMEL)
class VarSource(CamelRecord):
    """Where one value was written: a file position, or a command-line flag."""

    layer: Layer
    file: str | None = omitted_when(None)
    line: int | None = omitted_when(None)
    column: int | None = omitted_when(None)
    path: str | None = omitted_when(None)
    """The dotted path inside ``file`` (``spec.vars.replicas``, or ``replicas`` in a vars file)."""
    flag: str | None = omitted_when(None)
    """The flag as given (``--var replicas=5``) for the ``--var`` layer."""

    def describe(self) -> str:
        """``defaults.yaml:2:1``, ``--var replicas=5`` or ``run-… (recorded)``."""
        if self.flag is not None:
            return self.flag
        where = self.file or "<workflow>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where


@record(frozen=True, slots=True, config=CAMEL)
class VarEntry(CamelRecord):
    """One value of one variable in one layer."""

    value: Any
    source: VarSource


Values = dict[str, VarEntry]


@dataclass(frozen=True, slots=True)
class ResolvedVariable:
    """The winning value of a variable in one scope and the lower values it replaced."""

    name: str
    winner: VarEntry
    replaced: tuple[VarEntry, ...]

    def to_json(self) -> dict[str, Any]:
        """``{name, value, source, replaced}``: the winner's entry inline, then the values
        it replaced, nearest first (what ``explain`` shows)."""
        replaced = [entry.to_json() for entry in reversed(self.replaced)]
        return {"name": self.name, **self.winner.to_json(), "replaced": replaced}


@dataclass
class VariableLayers:
    """Every variable layer of one workflow invocation, with the source of each value.

    Agent layers are keyed by agent name; task layers by the document path of the task
    definition (``spec.tasks[2]``, ``spec.subworkflows.build.tasks[0]``), so every task
    expanded from one definition shares them.
    """

    workflow_files: Values = field(default_factory=dict)
    workflow: Values = field(default_factory=dict)
    agent_files: dict[str, Values] = field(default_factory=dict)
    agents: dict[str, Values] = field(default_factory=dict)
    task_files: dict[str, Values] = field(default_factory=dict)
    tasks: dict[str, Values] = field(default_factory=dict)
    invocation_files: Values = field(default_factory=dict)
    invocation: Values = field(default_factory=dict)

    def stack(self, agent: str | None, task_path: str | None) -> Iterator[Values]:
        """The eight layers of one task scope, lowest first (absent layers are empty)."""
        yield self.workflow_files
        yield self.workflow
        if agent is not None:
            yield self.agent_files.get(agent, {})
            yield self.agents.get(agent, {})
        if task_path is not None:
            yield self.task_files.get(task_path, {})
            yield self.tasks.get(task_path, {})
        yield self.invocation_files
        yield self.invocation

    def resolve(self, agent: str | None, task_path: str | None) -> list[ResolvedVariable]:
        """Each variable visible in a scope with its winning value, sorted by name."""
        history: dict[str, list[VarEntry]] = {}
        for layer in self.stack(agent, task_path):
            for name, entry in layer.items():
                history.setdefault(name, []).append(entry)
        return [
            ResolvedVariable(name, entries[-1], tuple(entries[:-1]))
            for name, entries in sorted(history.items())
        ]

    def invocation_values(self) -> dict[str, Any]:
        """Layers 7 and 8 merged (flags over files): what a run records for retries."""
        merged = {name: e.value for name, e in self.invocation_files.items()}
        merged.update({name: e.value for name, e in self.invocation.items()})
        return merged

    def invocation_sources(self) -> dict[str, dict[str, Any]]:
        """The winning source of each invocation value (kept with the run for ``explain``)."""
        merged = {name: e.source for name, e in self.invocation_files.items()}
        merged.update({name: e.source for name, e in self.invocation.items()})
        return {name: source.to_json() for name, source in sorted(merged.items())}

    def digest_material(self) -> dict[str, Any] | None:
        """The values that do not appear in the document itself, for the workflow digest.

        ``None`` when there are none, so a workflow with only inline ``vars`` keeps the
        digest it always had. File names are left out: moving a file does not change a run.
        """

        def values(layer: Values) -> dict[str, Any]:
            return {name: entry.value for name, entry in sorted(layer.items())}

        material: dict[str, Any] = {}
        if self.workflow_files:
            material["workflowFiles"] = values(self.workflow_files)
        agent_files = {k: values(v) for k, v in sorted(self.agent_files.items()) if v}
        if agent_files:
            material["agentFiles"] = agent_files
        task_files = {k: values(v) for k, v in sorted(self.task_files.items()) if v}
        if task_files:
            material["taskFiles"] = task_files
        invocation = self.invocation_values()
        if invocation:
            material["invocation"] = dict(sorted(invocation.items()))
        return material or None

    def below_task(
        self, agent: str | None, agent_vars: Mapping[str, Any], task_path: str
    ) -> dict[str, Any]:
        """Values of layers 1–5 for a task (its inline ``vars`` and the invocation go above)."""
        merged = {name: e.value for name, e in self.workflow_files.items()}
        merged.update((name, e.value) for name, e in self.workflow.items())
        if agent is not None:
            merged.update((name, e.value) for name, e in self.agent_files.get(agent, {}).items())
            merged.update(agent_vars)
        merged.update((name, e.value) for name, e in self.task_files.get(task_path, {}).items())
        return merged
