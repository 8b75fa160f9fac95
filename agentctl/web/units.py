"""The run page's budget table: each resource by the name a reader knows, each amount in
its unit through the one formatter of budget amounts (``agentctl.amounts.amount``, which messages,
errors and ``inspect`` use too; docs/budgets.md names the resources).
"""

from __future__ import annotations

from agentctl.amounts import amount

__all__ = ["budget_rows", "resource_name"]

_NAMES = {
    "artifactBytes": "artifact bytes",
    "costMicrousd": "cost",
    "inputTokens": "input tokens",
    "outputTokens": "output tokens",
    "totalTokens": "total tokens",
    "processOutputBytes": "process output",
    "providerRequests": "provider requests",
    "unpricedProviderRequests": "unpriced provider requests",
    "toolCalls": "tool calls",
    "turns": "agent turns",
}


def resource_name(resource: str) -> str:
    return _NAMES.get(resource, resource)


def budget_rows(budget: list[dict[str, object]]) -> list[dict[str, str]]:
    """One row per resource, every amount with its unit; an em dash where there is none."""
    rows = []
    for entry in budget:
        resource = str(entry["resource"])
        row = {"resource": resource, "name": resource_name(resource)}
        for column in ("used", "reserved", "limit"):
            value = entry.get(column)
            row[column] = amount(resource, float(value)) if isinstance(value, int | float) else "—"
        rows.append(row)
    return rows
