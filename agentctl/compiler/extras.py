"""Which optional extras a compiled plan needs, reported before a run exists.

A plan's declared effects say what its tasks will do: a long-term memory read, search or
write needs the ``vector`` extra, an MCP call (an ``mcp.call`` action or an agent's
``mcp:SERVER/TOOL`` tool) the ``mcp`` extra. When one is not installed, each first task
that needs it gets a ``missing_extra`` error naming the extra and the pip command, so
``agentctl check`` and ``roll`` refuse the workflow (exit 2) instead of failing mid-run.

The plan itself never depends on what is installed; only this diagnostic does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentctl.compiler.drafts import Reporter
from agentctl.compiler.plan import Plan
from agentctl.compiler.resolve import Node
from agentctl.extras import EXTRAS, installed

__all__ = ["check_extras", "extra_for_operation", "extras_needed"]

_VECTOR_OPERATIONS = frozenset(
    {
        "builtin.long_term_memory.read",
        "builtin.long_term_memory.search",
        "builtin.long_term_memory.write",
    }
)


def extra_for_operation(operation: str) -> str | None:
    """The extra an effect operation needs (``compensate:`` inverses included), if any."""
    operation = operation.removeprefix("compensate:")
    if operation in _VECTOR_OPERATIONS:
        return "vector"
    if operation == "mcp.call" or operation.startswith("tool.mcp:"):
        return "mcp"
    return None


def extras_needed(plan: Plan) -> dict[str, str]:
    """Extra name -> the first task (plan order of its declared effects) that needs it."""
    needed: dict[str, str] = {}
    for effect in plan.requirements.effects:
        extra = extra_for_operation(effect.operation)
        if extra is not None:
            needed.setdefault(extra, effect.task)
    return needed


def check_extras(
    plan: Plan,
    nodes: Mapping[str, Node],
    reporter: Reporter,
    *,
    is_installed: Callable[[str], bool] = installed,
) -> None:
    """Report a ``missing_extra`` error for each needed extra that is not installed."""
    for name, task_id in sorted(extras_needed(plan).items()):
        if is_installed(name):
            continue
        extra = EXTRAS[name]
        node = nodes.get(task_id)
        reporter.error(
            "missing_extra",
            f"task `{task_id}` uses {extra.feature}, which needs the optional extra "
            f"`{name}` ({extra.packages}); it is not installed",
            None if node is None else node.draft.path,
            help=f"install it with `{extra.pip_command}` (or `agentctl[all]` for every extra)",
        )
