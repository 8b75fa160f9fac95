"""A plan (or a run of it) as a mermaid or dot graph.

Expanded children read as ``unit[3]`` rather than ``unit--0003-1028b6aabb65``, each node
names what the task uses, and a run's graph fills each node with its task's state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

__all__ = ["GraphFormat", "plan_graph", "readable_task_id", "uses_text"]


class GraphFormat(StrEnum):
    mermaid = "mermaid"
    dot = "dot"


_EXPANDED = re.compile(r"--(\d{4})-[0-9a-f]{12}(?=--|$)")

# Fill colours by task state (light, so the black labels stay readable).
_FILLS = {
    "succeeded": "#c8e6c9",
    "failed": "#ffcdd2",
    "cancelled": "#e1bee7",
    "skipped": "#eeeeee",
    "running": "#b3e5fc",
    "waiting_for_approval": "#fff9c4",
    "waiting_for_effect": "#fff9c4",
    "pending": "#ffffff",
}


def readable_task_id(task_id: str) -> str:
    """``unit--0003-1028b6aabb65`` (the child a foreach or matrix expanded at index 3)
    reads as ``unit[3]``; other ids are unchanged."""
    return _EXPANDED.sub(lambda m: f"[{int(m.group(1))}]", task_id)


def uses_text(task: Any) -> str:
    name = task.uses.name
    kind = str(task.uses.kind)
    return f"{kind}:{name}" if isinstance(name, str) else kind


def plan_graph(plan: Any, fmt: str, states: Mapping[str, str] | None = None) -> str:
    """The graph in ``fmt``; with ``states`` (task id -> state) nodes are filled by state
    and labelled with it."""

    def node(task_id: str) -> str:
        return "n" + str(plan.order.index(task_id))

    def label(task_id: str, newline: str) -> str:
        text = f"{readable_task_id(task_id)}{newline}{uses_text(plan.tasks[task_id])}"
        if states is not None:
            text += f"{newline}{states.get(task_id, 'pending')}"
        return text

    if fmt == "mermaid":
        lines = ["flowchart TD"]
        for task_id in plan.order:
            lines.append(f'  {node(task_id)}["{label(task_id, "<br/>")}"]')
        for task_id in plan.order:
            for need in plan.tasks[task_id].needs:
                lines.append(f"  {node(need)} --> {node(task_id)}")
        if states is not None:
            used = sorted({states.get(t, "pending") for t in plan.order})
            for state in used:
                lines.append(f"  classDef {state} fill:{_FILLS.get(state, '#ffffff')}")
            for task_id in plan.order:
                lines.append(f"  class {node(task_id)} {states.get(task_id, 'pending')}")
        return "\n".join(lines) + "\n"
    lines = [f'digraph "{plan.workflow_name}" {{', "  rankdir=TB;"]
    for task_id in plan.order:
        style = ""
        if states is not None:
            fill = _FILLS.get(states.get(task_id, "pending"), "#ffffff")
            style = f', style=filled, fillcolor="{fill}"'
        lines.append(f'  {node(task_id)} [label="{label(task_id, chr(92) + "n")}"{style}];')
    for task_id in plan.order:
        for need in plan.tasks[task_id].needs:
            lines.append(f"  {node(need)} -> {node(task_id)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
