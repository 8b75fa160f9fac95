"""Whole-plan limits (docs/workflow-language.md, docs/compiler.md steps 6–7, docs/budgets.md):
parallel memory-write
conflicts and the static budget counts.

Memory conflicts: with ``maxConcurrency > 1``, two tasks whose write sets overlap must be
ordered by a dependency path. Checking every pair of writers is quadratic (10,000 children
writing one key would be 50 million pairs); instead the writers of a key are sorted by plan
order, which is a topological order, and only neighbours are tested: all writers are
ordered iff each neighbour pair is, because paths compose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentctl.compiler.drafts import Reporter, sub_path
from agentctl.compiler.graph import ancestor_masks
from agentctl.compiler.resolve import Node

__all__ = ["check_budget_counts", "check_memory_conflicts"]

_MAX_CONFLICTS_PER_KEY = 10


def check_memory_conflicts(
    order: Sequence[str], nodes: Mapping[str, Node], max_concurrency: int, reporter: Reporter
) -> None:
    if max_concurrency <= 1:
        return
    writers: dict[str, list[str]] = {}
    for task_id in order:
        for key in nodes[task_id].memory_writes:
            writers.setdefault(key, []).append(task_id)
    shared = {key: ids for key, ids in writers.items() if len(ids) > 1}
    if not shared:
        return
    masks = ancestor_masks(order, {task_id: nodes[task_id].draft.needs for task_id in order})
    bit = {task_id: 1 << index for index, task_id in enumerate(order)}
    for key in sorted(shared):
        ids = shared[key]
        reported = 0
        for earlier, later in zip(ids, ids[1:], strict=False):
            if masks[later] & bit[earlier]:
                continue
            reported += 1
            if reported > _MAX_CONFLICTS_PER_KEY:
                break
            reporter.error(
                "schema_violation",
                f"parallel tasks `{earlier}` and `{later}` both write working-memory key "
                f"`{key}` with no dependency path between them",
                sub_path(nodes[later].draft.path, "memoryWrites")
                if nodes[later].draft.memory_writes is not None
                else sub_path(nodes[later].draft.path, "with", "key"),
                help="order the tasks with needs, give them disjoint keys, or set "
                "runtime.maxConcurrency: 1",
            )


def check_budget_counts(
    budgets: Mapping[str, Any],
    planned: Mapping[str, int],
    reporter: Reporter,
) -> None:
    """``maxTasks``/``maxExpansionItems``/``maxLoopIterations`` against the compiled graph."""
    labels = {
        "maxTasks": (
            "plannedTasks",
            "compiled tasks (children, aggregates, routers and sub-workflow boundaries count)",
        ),
        "maxExpansionItems": ("plannedExpansionItems", "foreach/matrix children"),
        "maxLoopIterations": ("plannedLoopIterations", "loop iterations (sum of maxIterations)"),
    }
    for field, (count_name, what) in labels.items():
        limit = budgets.get(field)
        count = planned[count_name]
        if isinstance(limit, int) and count > limit:
            reporter.error(
                "schema_violation",
                f"the plan has {count} {what}, more than runtime.budgets.{field} ({limit})",
                sub_path("spec.runtime.budgets", field),
                help=f"raise runtime.budgets.{field} to at least {count} or shrink the workflow",
            )
