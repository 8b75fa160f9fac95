"""``agentctl migrate``: translate a legacy ``playbook:`` document to ``agentctl.dev/v1``.

The translation is mechanical and written out for a person to review (``check`` reports
legacy files as ``migration_required`` and never translates them on the fly):

- ``playbook`` → ``metadata.name``, ``description`` → ``metadata.description``;
- ``modules`` → ``spec.actions``, and every ``uses: module:x`` → ``uses: action:x``
  (in tasks, sub-workflow tasks and compensation);
- ``policy.approvalMode`` → ``spec.policy.approval``;
- working-memory ``initial`` (``memory.initial`` or ``memory.working.initial``) →
  ``spec.memory.working``;
- agents that name no provider get the offline ``fake`` provider (declared if missing), so
  the result runs offline until a real provider is chosen;
- every other top-level key moves under ``spec`` unchanged; what the format does not know
  is then reported by the same validation ``check`` runs.

Each change is listed as a note, so the review knows what to look at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentctl.spec.document import API_VERSION

__all__ = ["is_legacy", "migrate_document"]

_METADATA_KEYS = ("description", "labels")


def is_legacy(raw: Any) -> bool:
    """Whether ``raw`` is a legacy document: no ``apiVersion``, a ``playbook`` key."""
    return isinstance(raw, Mapping) and "apiVersion" not in raw and "playbook" in raw


def migrate_document(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ``agentctl.dev/v1`` document for a legacy one, and the notes on what changed."""
    notes: list[str] = []
    metadata: dict[str, Any] = {"name": str(raw["playbook"])}
    notes.append("playbook → metadata.name")
    spec: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "playbook":
            continue
        if key in _METADATA_KEYS:
            metadata[key] = value
            notes.append(f"{key} → metadata.{key}")
        elif key == "modules":
            spec["actions"] = value
            notes.append("modules → spec.actions")
        else:
            spec[key] = value
    policy = spec.get("policy")
    if isinstance(policy, Mapping) and "approvalMode" in policy:
        spec["policy"] = {("approval" if k == "approvalMode" else k): v for k, v in policy.items()}
        notes.append("policy.approvalMode → spec.policy.approval")
    memory = spec.get("memory")
    if isinstance(memory, Mapping):
        spec["memory"] = _memory(memory, notes)
    renamed = _rename_modules(spec.get("tasks"))
    for definition in (spec.get("subworkflows") or {}).values():
        if isinstance(definition, Mapping):
            renamed += _rename_modules(definition.get("tasks"))
    if renamed:
        notes.append(f"uses: module:NAME → uses: action:NAME ({renamed} task(s))")
    _default_provider(spec, notes)
    document = {"apiVersion": API_VERSION, "kind": "Workflow", "metadata": metadata, "spec": spec}
    return document, notes


def _memory(memory: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    out = dict(memory)
    if "initial" in out:
        out["working"] = out.pop("initial")
        notes.append("memory.initial → spec.memory.working")
    working = out.get("working")
    if isinstance(working, Mapping) and set(working) == {"initial"}:
        out["working"] = working["initial"]
        notes.append("memory.working.initial → spec.memory.working")
    return out


def _rename_modules(tasks: Any) -> int:
    """Rewrite ``module:x`` references in place; returns how many were rewritten."""
    if not isinstance(tasks, list):
        return 0
    count = 0
    for task in tasks:
        if not isinstance(task, dict):
            continue
        for holder in (task, task.get("compensate")):
            if isinstance(holder, dict):
                uses = holder.get("uses")
                if isinstance(uses, str) and uses.startswith("module:"):
                    holder["uses"] = "action:" + uses[len("module:") :]
                    count += 1
    return count


def _default_provider(spec: dict[str, Any], notes: list[str]) -> None:
    agents = spec.get("agents")
    if not isinstance(agents, Mapping):
        return
    bare = [
        name
        for name, agent in agents.items()
        if isinstance(agent, dict) and "provider" not in agent
    ]
    if not bare:
        return
    providers = spec.setdefault("providers", {})
    if isinstance(providers, dict) and "fake" not in providers:
        providers["fake"] = {"kind": "fake"}
        notes.append("declared the offline `fake` provider for agents that named none")
    for name in bare:
        agents[name]["provider"] = "fake"
        agents[name].setdefault("model", "scripted")
    notes.append(
        f"agent(s) {', '.join(sorted(bare))} use the `fake` provider: choose a real one "
        "before running against a model"
    )
