"""How a budget amount reads: ``1,500,000 bytes``, ``$2.50``, ``3 requests``.

The one formatter of amounts of the budget ledger's resources (docs/budgets.md): budget
messages and errors, ``inspect``, the line that ends a run and the dashboard's budget
table all show an amount through :func:`amount`. It stands on the bottom floor, a plain
function of a resource name and a number, so the engine, the command line and the
dashboard each import it without reaching into one another.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["amount"]

#: ledger resource -> (singular, plural) unit; costMicrousd is shown in dollars.
_UNITS = {
    "providerRequests": ("request", "requests"),
    "unpricedProviderRequests": ("request", "requests"),
    "turns": ("turn", "turns"),
    "toolCalls": ("tool call", "tool calls"),
    "inputTokens": ("token", "tokens"),
    "outputTokens": ("token", "tokens"),
    "totalTokens": ("token", "tokens"),
    "processOutputBytes": ("byte", "bytes"),
    "artifactBytes": ("byte", "bytes"),
    "wallTimeSeconds": ("second", "seconds"),
}


def amount(resource: str, units: float | None) -> str:
    """``units`` of ``resource`` as a person reads them: ``1,500,000 bytes``, ``$2.50``
    (micro-USD shown as dollars), ``3 requests``; never ``1.5e+06``. The one formatter of
    budget amounts for messages, errors and ``inspect``."""
    if units is None:
        return "unlimited"
    if resource == "costMicrousd":
        dollars = Decimal(int(round(units))) / Decimal(1_000_000)
        text = f"{dollars:,.6f}".rstrip("0")
        whole, _, cents = text.partition(".")
        return f"${whole}.{cents.ljust(2, '0')}"
    number = f"{int(units):,}" if float(units).is_integer() else f"{units:,.2f}"
    singular, plural = _UNITS.get(resource, ("unit", "units"))
    return f"{number} {singular if units == 1 else plural}"
