"""The run's task graph as data: nodes with their live state, and the plan's dependency edges.

The page draws it with dagre (``static/dagre.min.js``, vendored) and
``/runs/{run_id}/graph.json`` serves the very same document, so a script or a test reads
what the page draws. Edges are exactly the compiled plan's ``needs`` (an edge goes from the
task needed to the task that needs it). Children of a ``foreach``, ``matrix`` or ``loop``
and the steps of a sub-workflow invocation carry the ``group`` they fold into (the id of
their aggregate task) and a label that says which item, cell or iteration they are, so a
reader sees ``lint`` rather than ``check--0000-62216e66457c``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PlanShape", "child_label", "plan_shape", "run_graph"]

#: Plan shapes kept (the runs last viewed; a 1,000-task shape is a few hundred KB).
SHAPES_KEPT = 16

_LABEL_LIMIT = 40


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _LABEL_LIMIT else text[: _LABEL_LIMIT - 1] + "…"


def child_label(bindings: dict[str, Any]) -> str:
    """What an expanded child stands for: its foreach item, its matrix cell
    (``os=linux, py=3.12``) or its loop iteration."""
    if "matrix" in bindings and isinstance(bindings["matrix"], dict):
        return ", ".join(f"{axis}={_short(v)}" for axis, v in bindings["matrix"].items())
    if "loopIndex" in bindings:
        return f"iteration {int(bindings['loopIndex']) + 1}"
    items = [value for key, value in bindings.items() if key != "foreachIndex"]
    if len(items) == 1:
        return _short(items[0])
    return _short({k: v for k, v in bindings.items() if k != "foreachIndex"})


def run_graph(plan: dict[str, Any], states: dict[str, str]) -> dict[str, Any]:
    """``{"nodes": [...], "edges": [...], "groups": [...]}`` of a compiled plan.

    A node is ``{id, label, state, kind, group}`` (``group`` is None for a top-level task);
    an edge is ``{from, to}``; a group is ``{id, kind, label, size}`` where ``id`` is the
    aggregate task the group's children fold into (the page collapses a group into it)."""
    tasks: dict[str, Any] = plan.get("tasks") or {}
    order: list[str] = list(plan.get("order") or tasks)
    group_of: dict[str, str] = {}
    groups: dict[str, dict[str, Any]] = {}
    for task_id in order:
        uses = tasks[task_id].get("uses") or {}
        kind = uses.get("kind")
        name = uses.get("name")
        if kind == "subworkflow_aggregate" and isinstance(name, dict):
            children = [str(c) for c in name.get("children") or []]
            # The invocation's input task is part of it too.
            inputs = f"{task_id}--inputs-"
            members = children + [t for t in order if t.startswith(inputs)]
            groups[task_id] = {
                "id": task_id,
                "kind": "subworkflow",
                "label": f"{task_id} ({name.get('name')})",
                "size": len(members),
            }
            for child in members:
                group_of.setdefault(child, task_id)
    for task_id in order:
        expansion = tasks[task_id].get("expansion")
        if expansion:
            parent = str(expansion["parent"])
            group_of[task_id] = parent
            bindings = expansion.get("bindings") or {}
            kind = (
                "matrix"
                if "matrix" in bindings
                else "loop"
                if "loopIndex" in bindings
                else "foreach"
            )
            entry = groups.setdefault(
                parent, {"id": parent, "kind": kind, "label": parent, "size": 0}
            )
            entry["size"] += 1
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, str]] = []
    for task_id in order:
        task = tasks[task_id]
        uses = task.get("uses") or {}
        expansion = task.get("expansion")
        group = group_of.get(task_id)
        if expansion:
            label = child_label(expansion.get("bindings") or {})
        elif group is not None and task_id.startswith(group + "--"):
            local = task_id[len(group) + 2 :]
            label = "inputs" if local.startswith("inputs-") else local
        else:
            label = task_id
        nodes.append(
            {
                "id": task_id,
                "label": label,
                "state": states.get(task_id, "pending"),
                "kind": str(uses.get("kind", "")),
                "group": group,
            }
        )
        edges.extend({"from": str(need), "to": task_id} for need in task.get("needs") or [])
    return {"nodes": nodes, "edges": edges, "groups": list(groups.values())}


@dataclass(frozen=True, slots=True)
class PlanShape:
    """What the run page derives from a plan alone, once per run: the graph's
    nodes (without states), edges and groups, each task's label, and the tasks a retry
    may start from."""

    nodes: list[dict[str, Any]]
    edges: list[dict[str, str]]
    groups: list[dict[str, Any]]
    labels: dict[str, str]
    retry_roots: list[str]

    def graph(self, states: Mapping[str, str]) -> dict[str, Any]:
        """:func:`run_graph` of the plan with these task states (the same document)."""
        return {
            "nodes": [{**node, "state": states.get(node["id"], "pending")} for node in self.nodes],
            "edges": self.edges,
            "groups": self.groups,
        }


_shapes: OrderedDict[Hashable, PlanShape] = OrderedDict()
_shapes_lock = threading.Lock()


def plan_shape(key: Hashable, plan: Mapping[str, Any]) -> PlanShape:
    """The :class:`PlanShape` of ``plan``, kept under ``key``: a key names one run's plan,
    which never changes (``RunView.plan_key``), so what is kept is never stale."""
    with _shapes_lock:
        kept = _shapes.get(key)
        if kept is not None:
            _shapes.move_to_end(key)
            return kept
    tasks: Mapping[str, Any] = plan.get("tasks") or {}
    bare = run_graph(dict(plan), {})
    shape = PlanShape(
        nodes=bare["nodes"],
        edges=bare["edges"],
        groups=bare["groups"],
        labels={node["id"]: node["label"] for node in bare["nodes"]},
        retry_roots=[t for t in plan.get("order") or [] if not tasks[t].get("expansion")],
    )
    with _shapes_lock:
        _shapes[key] = shape
        while len(_shapes) > SHAPES_KEPT:
            _shapes.popitem(last=False)
    return shape
