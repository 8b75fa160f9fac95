"""Budget amounts in their units, for the run page: bytes, tokens, dollars, counts.

The budget ledger keeps numbers per resource (``artifactBytes``, ``costMicrousd``,
``inputTokens``…); a reader wants ``82 B``, ``$0.0123`` and ``1,204 tokens``. Kept small and
local to the dashboard; the resource names are those of docs/budgets.md.
"""

from __future__ import annotations

__all__ = ["budget_rows", "format_amount", "resource_name"]

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


def _bytes(value: float) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_amount(resource: str, value: float | None) -> str:
    """``value`` of ``resource`` with its unit; an em dash for no value (no limit)."""
    if value is None:
        return "—"
    if resource.endswith("Bytes"):
        return _bytes(value)
    if resource == "costMicrousd":
        dollars = float(value) / 1_000_000
        return f"${dollars:,.2f}" if dollars >= 1 or dollars == 0 else f"${dollars:.6f}".rstrip("0")
    count = f"{int(round(float(value))):,}"
    if resource.endswith("Tokens"):
        return f"{count} tokens"
    return count


def budget_rows(budget: list[dict[str, object]]) -> list[dict[str, str]]:
    """The run page's budget table: one row per resource, every amount with its unit."""
    rows = []
    for entry in budget:
        resource = str(entry["resource"])
        rows.append(
            {
                "resource": resource,
                "name": resource_name(resource),
                "used": format_amount(resource, _number(entry.get("used"))),
                "reserved": format_amount(resource, _number(entry.get("reserved"))),
                "limit": format_amount(resource, _number(entry.get("limit"))),
            }
        )
    return rows


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
