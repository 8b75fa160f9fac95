"""Placeholders in help that read as the value to type (``--db PATH``, ``RUN``,
``--input KEY=VALUE``), instead of the parser's type names (``<str>``, ``<list[str]>``).

One table for every command, applied to the command tree once it is built; a parameter
that declares its own metavar keeps it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply"]

_ARGUMENTS = {
    "approval_id": "APPROVAL",
    "dest": "DEST",
    "digest": "DIGEST",
    "effect_id": "EFFECT",
    "run_id": "RUN",
    "shell": "bash|zsh|fish",
    "source_run_id": "RUN",
    "workflow": "FILE",
}

_OPTIONS = {
    "actor": "NAME",
    "color": "auto|always|never",
    "compensation_effect": "EFFECT",
    "db": "PATH",
    "evidence_file": "PATH",
    "filters": "KEY=JSON",
    "from_tasks": "TASK",
    "graph": "mermaid|dot",
    "input_pairs": "KEY=VALUE",
    "inputs": "JSON",
    "inputs_file": "PATH",
    "limit": "N",
    "metadata": "JSON",
    "mode": "text|vector|hybrid",
    "older_than_days": "DAYS",
    "output": "human|json|jsonl",
    "reason": "TEXT",
    "result_file": "PATH",
    "result_schema_file": "PATH",
    "retention_days": "DAYS",
    "run": "RUN",
    "status": "applied|not-applied|compensated",
    "task": "TASK",
    "timeout_seconds": "SECONDS",
    "workflow": "NAME",
    "workspace": "DIR",
    "write": "PATH",
}


def _no_type(ctx: Any = None) -> None:
    return None


def apply(command: Any) -> Any:
    """Give every parameter of ``command`` and its sub-commands a readable metavar."""
    for param in getattr(command, "params", []):
        if param.param_type_name == "argument":
            # The placeholder says what to give; the parser's type name (<str>) adds nothing.
            param.display_type = param.display_type_rich = _no_type
        if param.metavar is not None or getattr(param, "is_flag", False):
            continue
        name = param.name or ""
        table = _ARGUMENTS if param.param_type_name == "argument" else _OPTIONS
        param.metavar = table.get(name, name.upper())
    for child in (getattr(command, "commands", None) or {}).values():
        apply(child)
    return command
