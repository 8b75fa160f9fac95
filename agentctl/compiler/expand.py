"""Static fan-out (docs/workflow-language.md, docs/compiler.md): foreach, matrix and loop.

Each source task becomes its children, then an aggregate that keeps the source id and
needs exactly the children, in place, so downstream tasks keep reading
``tasks.PARENT.output.items``. Children keep the source's ``needs``, ``with``, ``vars``
(plus bindings), ``when`` (loop iterations get the guard instead), ``memoryWrites``,
``retry``, ``timeoutSeconds``, ``failure``, ``compensate`` and ``outputSchema``.

The per-construct cap is a compile setting, not a document rule: a ``maxItems`` above
``hard_max_expansion_items`` (256, or what ``runtime.limits.maxItemsPerExpansion`` raises it
to) is a ``schema_violation``, and an absent ``maxItems`` means ``max_expansion_items``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.compiler import templating
from agentctl.compiler.drafts import Draft, Reporter, sub_path
from agentctl.compiler.naming import (
    expansion_child_id,
    foreach_bindings,
    loop_bindings,
    loop_previous_template,
    matrix_bindings,
)
from agentctl.compiler.task_parts import Expansion, TaskUses
from agentctl.spec.models_tasks import Foreach
from agentctl.spec.variables import RESERVED_VARIABLES

__all__ = ["ExpansionCounts", "ExpansionSettings", "expand_tasks"]


@dataclass(frozen=True, slots=True)
class ExpansionSettings:
    max_expansion_items: int
    hard_max_expansion_items: int
    max_loop_iterations: int


@dataclass(slots=True)
class ExpansionCounts:
    """Static counts for the budget checks (docs/budgets.md)."""

    expansion_items: int = 0
    loop_iterations: int = 0


class _Expander:
    def __init__(self, reporter: Reporter, settings: ExpansionSettings) -> None:
        self.reporter = reporter
        self.settings = settings
        self.counts = ExpansionCounts()
        self.out: list[Draft] = []

    def add(self, draft: Draft) -> None:
        if draft.synthetic is not None:
            self.out.append(draft)
        elif draft.loop is not None:
            self._loop(draft, draft.loop)
        elif draft.foreach is not None or draft.matrix is not None:
            self._fan_out(draft)
        else:
            self.out.append(draft)

    # -- loop ---------------------------------------------------------------------------

    def _loop(self, task: Draft, loop: Mapping[str, Any]) -> None:
        path = sub_path(task.path, "loop")
        problems = 0
        for field in ("when", "foreach", "matrix", "route"):
            if getattr(task, field) is not None:
                self._error(
                    f"loop task `{task.id}` cannot also declare `{field}`",
                    sub_path(task.path, field),
                    "a loop's `while` is its guard; move other constructs to another task",
                )
                problems += 1
        if task.uses == "router":
            self._error(
                f"router task `{task.id}` cannot be a loop body", sub_path(task.path, "uses")
            )
            problems += 1
        if RESERVED_VARIABLES & set(task.vars):
            problems += 1  # reported with the variable layers, at the key itself
        iterations = loop.get("maxIterations")
        limit = self.settings.max_loop_iterations
        if not isinstance(iterations, int) or not 1 <= iterations <= limit:
            self._error(
                f"loop task `{task.id}` maxIterations must be between 1 and {limit}",
                sub_path(path, "maxIterations"),
                "lower maxIterations (raise CompileSettings.max_loop_iterations to allow more)",
            )
            problems += 1
        condition = templating.alias_loop_output(str(loop.get("while", "")))
        while_path = sub_path(path, "while")
        if not templating.is_whole_template(condition):
            self.reporter.error(
                "invalid_template",
                f"loop task `{task.id}` while must be exactly one `${{{{ … }}}}` condition",
                while_path,
                help='write it as one whole template, e.g. "${{ vars.loopIndex < 3 }}"',
            )
            problems += 1
        else:
            why = templating.condition_problem(condition)
            if why is not None:
                self.reporter.error(
                    "invalid_template",
                    f"loop task `{task.id}` while: {why}",
                    while_path,
                    help="fix the condition; see the template reference (docs/templates.md)",
                )
                problems += 1
        if problems or not isinstance(iterations, int):
            return
        self.counts.loop_iterations += iterations
        children: list[str] = []
        previous: Any = loop.get("initial")
        for index in range(iterations):
            bindings = loop_bindings(index, previous)
            child_id = expansion_child_id(task.id, index, bindings)
            needs = list(task.needs)
            if children:
                needs.append(children[-1])
            self.out.append(self._child(task, child_id, index, bindings, needs, condition, path))
            children.append(child_id)
            previous = loop_previous_template(child_id)
        self.out.append(
            self._aggregate(
                task,
                TaskUses("loop_aggregate", {"children": children, "condition": condition}),
                children,
            )
        )

    # -- foreach / matrix ---------------------------------------------------------------

    def _fan_out(self, task: Draft) -> None:
        if task.uses == "router":
            self._error(f"router task `{task.id}` cannot be expanded", task.path)
            return
        if task.foreach is not None and task.matrix is not None:
            self._error(
                f"task `{task.id}` cannot declare both foreach and matrix",
                task.path,
                "split it into two tasks, or express the foreach list as a matrix axis",
            )
            return
        if task.foreach is not None:
            bindings = self._foreach_bindings(task, task.foreach)
            source = "foreach"
        else:
            assert task.matrix is not None
            bindings = self._matrix_bindings(task, task.matrix)
            source = "matrix"
        if bindings is None:
            return
        self.counts.expansion_items += len(bindings)
        binding_path = sub_path(task.path, source)
        children: list[str] = []
        for index, values in enumerate(bindings):
            child_id = expansion_child_id(task.id, index, values)
            self.out.append(
                self._child(task, child_id, index, values, task.needs, task.when, binding_path)
            )
            children.append(child_id)
        self.out.append(self._aggregate(task, TaskUses("aggregate", children), children))

    def _cap(self, task: Draft, spec: Mapping[str, Any], path: str, count: int, what: str) -> bool:
        hard = self.settings.hard_max_expansion_items
        declared = spec.get("maxItems")
        if declared is not None and (not isinstance(declared, int) or not 1 <= declared <= hard):
            self._error(
                f"task `{task.id}` {what} maxItems must be between 1 and {hard}",
                sub_path(path, "maxItems"),
                "lower maxItems, or raise spec.runtime.limits.maxItemsPerExpansion "
                "(at most 100000) to allow more",
            )
            return False
        limit = self.settings.max_expansion_items if declared is None else declared
        if count > limit:
            self._error(
                f"task `{task.id}` {what} expands to {count} items, more than maxItems ({limit})",
                path,
                f"set {what}.maxItems to at least {count} (at most {hard}) or shorten the list",
            )
            return False
        return True

    def _conflict(self, task: Draft, names: tuple[str, ...], what: str) -> bool:
        clash = [name for name in names if name in task.vars]
        # Reserved names are reported with the variable layers, at the key itself.
        shown = [name for name in clash if name not in RESERVED_VARIABLES]
        if shown:
            self._error(
                f"task `{task.id}` {what} bindings conflict with its vars: {', '.join(shown)}",
                sub_path(task.path, "vars"),
                "rename those vars; the expansion sets them on every child",
            )
        return bool(clash)

    def _foreach_bindings(
        self, task: Draft, foreach: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        items = foreach.get("items")
        path = sub_path(task.path, "foreach")
        binding = str(foreach.get("as", Foreach.default_of("as_")))
        if not isinstance(items, list):
            self._error(f"task `{task.id}` foreach.items must be a list", sub_path(path, "items"))
            return None
        if self._conflict(task, (binding, "foreachIndex"), "foreach"):
            return None
        if not self._cap(task, foreach, path, len(items), "foreach"):
            return None
        return [foreach_bindings(binding, item, index) for index, item in enumerate(items)]

    def _matrix_bindings(
        self, task: Draft, matrix: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        axes: Mapping[str, Any] = matrix.get("axes") or {}
        path = sub_path(task.path, "matrix")
        if not axes or not all(isinstance(values, list) for values in axes.values()):
            self._error(
                f"task `{task.id}` matrix needs at least one axis, each a list of values",
                sub_path(path, "axes"),
            )
            return None
        if self._conflict(task, ("matrix", "matrixIndex"), "matrix"):
            return None
        names = sorted(axes)
        if not self._cap(task, matrix, path, math.prod(len(axes[n]) for n in names), "matrix"):
            return None
        return [
            matrix_bindings(dict(zip(names, combination, strict=True)), index)
            for index, combination in enumerate(itertools.product(*(axes[n] for n in names)))
        ]

    # -- shared -------------------------------------------------------------------------

    def _child(
        self,
        task: Draft,
        child_id: str,
        index: int,
        bindings: dict[str, Any],
        needs: list[str],
        when: str | None,
        binding_path: str,
    ) -> Draft:
        return Draft(
            id=child_id,
            path=task.path,
            uses=task.uses,
            needs=needs,
            with_=task.with_,
            vars={**task.vars, **bindings},
            when=when,
            memory_writes=task.memory_writes,
            retry=task.retry,
            timeout_seconds=task.timeout_seconds,
            failure=task.failure,
            compensate=task.compensate,
            output_schema=task.output_schema,
            artifacts=task.artifacts,
            session=task.session,
            expansion=Expansion(task.id, index, bindings),
            binding_path=binding_path,
            with_path=task.with_path,
        )

    def _aggregate(self, task: Draft, uses: TaskUses, children: list[str]) -> Draft:
        return Draft(
            id=task.id,
            path=task.path,
            uses=task.uses,
            needs=list(children),
            with_={},
            vars={},
            failure=task.failure,
            synthetic=uses,
            source_needs=tuple(task.needs),
            guard_targets=tuple(children),
        )

    def _error(self, message: str, path: str, help: str | None = None) -> None:
        self.reporter.error("schema_violation", message, path, help)


def expand_tasks(
    drafts: list[Draft], reporter: Reporter, settings: ExpansionSettings
) -> tuple[list[Draft], ExpansionCounts]:
    """Expand every loop/foreach/matrix draft in place; returns the drafts and the counts."""
    expander = _Expander(reporter, settings)
    for draft in drafts:
        expander.add(draft)
    return expander.out, expander.counts
