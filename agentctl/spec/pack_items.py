"""A pack's items: validated with the workflow's own models, then named ``<pack>.<item>``.

Each item is checked by placing the manifest's sections where a workflow keeps them
(``workflows`` become ``subworkflows``, ``policyDefaults`` the ``policy``) and validating
that as a workflow document, so a pack action obeys exactly the rules of a workflow action.
Diagnostics are moved back to the manifest's own paths and lines.

References inside a pack (a sub-workflow task's ``uses``, its ``compensate.uses``, an
agent's ``tools``) name the pack's own items by their short names and are renamed with
them; a reference to anything the pack does not define is a ``missing_reference``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentctl.diagnostics import Diagnostic
from agentctl.spec.document import API_VERSION
from agentctl.spec.pack_manifest import PackManifest
from agentctl.spec.source_map import SourceMap, diagnostic_at, join_path
from agentctl.spec.validate import validate_document

__all__ = ["ITEM_SECTIONS", "pack_items"]

ITEM_SECTIONS = {
    "actions": "actions",
    "agents": "agents",
    "tools": "tools",
    "workflows": "subworkflows",
}
"""Manifest section -> the ``spec`` section its items join."""

# A workflow needs one task to validate; this one refers to nothing.
_PLACEHOLDER_TASK = {
    "id": "pack",
    "uses": "router",
    "route": {"select": "${{ inputs.x }}", "cases": [{"equals": 1, "tasks": ["pack"]}]},
}
_REFERENCE_SECTIONS = {"action": "actions", "agent": "agents", "workflow": "workflows"}


def _validate(manifest: PackManifest, source: SourceMap) -> list[Diagnostic]:
    positions: dict[str, tuple[int, int]] = {}
    for path, position in source.positions.items():
        for section, target in (*ITEM_SECTIONS.items(), ("policyDefaults", "policy")):
            if path == section or path.startswith((section + ".", section + "[")):
                positions["spec." + target + path[len(section) :]] = position
    synthetic = {
        "apiVersion": API_VERSION,
        "kind": "Workflow",
        "metadata": {"name": manifest.name},
        "spec": {
            "actions": manifest.actions,
            "agents": manifest.agents,
            "tools": manifest.tools,
            "subworkflows": manifest.workflows,
            "policy": manifest.policy_defaults,
            "tasks": [_PLACEHOLDER_TASK],
        },
    }
    _, problems = validate_document(synthetic, SourceMap(source.file, positions))
    back = (("spec.subworkflows", "workflows"), ("spec.policy", "policyDefaults"), ("spec.", ""))
    moved = []
    for problem in problems:
        path = problem.path or ""
        for prefix, original in back:
            if path.startswith(prefix):
                path = original + path[len(prefix) :]
                break
        moved.append(dataclasses.replace(problem, path=path, file=source.file))
    return moved


def pack_items(
    manifest: PackManifest, source: SourceMap
) -> tuple[dict[str, dict[str, Any]], list[Diagnostic]]:
    """``{spec section: {qualified name: definition}}`` and the problems found."""
    problems = _validate(manifest, source)
    if problems:
        return {}, problems
    pack = manifest.name
    local = {section: set(getattr(manifest, section)) for section in ITEM_SECTIONS}

    def qualify(kind: str, name: str, where: str) -> str:
        if name not in local[_REFERENCE_SECTIONS.get(kind, "tools")]:
            problems.append(
                diagnostic_at(
                    "missing_reference",
                    f"pack `{pack}` refers to {kind} `{name}`, which it does not define",
                    where,
                    source,
                    "items inside a pack may only use the pack's own items",
                )
            )
        return f"{pack}.{name}"

    items: dict[str, dict[str, Any]] = {target: {} for target in ITEM_SECTIONS.values()}
    for name, action in manifest.actions.items():
        items["actions"][f"{pack}.{name}"] = action
    for name, tool in manifest.tools.items():
        items["tools"][f"{pack}.{name}"] = tool
    for name, agent in manifest.agents.items():
        path = join_path("agents", name)
        if agent.get("varsFiles"):
            problems.append(_inline_only(join_path(path, "varsFiles"), source))
        if agent.get("instructionsFile") is not None:
            problems.append(
                diagnostic_at(
                    "unsupported_capability",
                    f"pack agent `{name}` uses instructionsFile",
                    join_path(path, "instructionsFile"),
                    source,
                    "write a pack agent's instructions inline",
                )
            )
        tools = [
            qualify("tool", str(tool), join_path(join_path(path, "tools"), index))
            for index, tool in enumerate(agent.get("tools") or ())
        ]
        items["agents"][f"{pack}.{name}"] = {**agent, **({"tools": tools} if tools else {})}
    for name, definition in manifest.workflows.items():
        base = join_path(join_path("workflows", name), "tasks")
        tasks = [
            _qualified_task(task, join_path(base, index), qualify)
            for index, task in enumerate(definition.get("tasks") or ())
        ]
        for index, task in enumerate(definition.get("tasks") or ()):
            if task.get("varsFiles"):
                problems.append(
                    _inline_only(join_path(join_path(base, index), "varsFiles"), source)
                )
        items["subworkflows"][f"{pack}.{name}"] = {**definition, "tasks": tasks}
    return items, problems


def _inline_only(path: str, source: SourceMap) -> Diagnostic:
    return diagnostic_at(
        "unsupported_capability",
        "a pack item cannot read variables files",
        path,
        source,
        "give the pack's variables inline (`vars`); the workflow's varsFiles, --vars-file "
        "and --var still reach every task",
    )


def _qualified_task(task: Mapping[str, Any], path: str, qualify: Any) -> dict[str, Any]:
    out = dict(task)
    kind, sep, name = str(task.get("uses", "")).partition(":")
    if sep and kind in _REFERENCE_SECTIONS:
        out["uses"] = f"{kind}:" + qualify(kind, name, join_path(path, "uses"))
    compensate = task.get("compensate")
    if isinstance(compensate, Mapping):
        kind, sep, name = str(compensate.get("uses", "")).partition(":")
        if sep and kind == "action":
            where = join_path(join_path(path, "compensate"), "uses")
            out["compensate"] = {**compensate, "uses": "action:" + qualify(kind, name, where)}
    return out
