"""The run's resource ledger (docs/budgets.md): reserve the worst case, then settle.

Before each fresh dispatch the gate reserves the effect's worst case — one request, one
turn, an input-token estimate of ``ceil(bytes / 4)`` of the serialized request, the agent's
``maxOutputTokens``, a worst-case cost from the price sheet, a process's combined output
limit, one tool call — in the same IMMEDIATE transaction that journals the effect as
``requested``. A reservation that would pass a limit is refused: ``budget.exceeded`` is
recorded, nothing is dispatched, and the run fails whatever the task's ``failure`` says.
After the dispatch the reservation is replaced by actual usage; an overrun found then is
recorded and fails the task before anything else is dispatched. Limits are exceeded only
when usage is strictly greater. Reused and replayed results reserve nothing: only fresh
dispatches pass through here, and every derived run has a ledger of its own.

An effect whose outcome is unknown keeps its reservation until an operator concludes it;
the conclusion settles it (``conclude``): ``not_applied`` gives it back, ``applied`` and
``compensated`` count it as used. Amounts are shown in their units by
:func:`agentctl.amounts.amount`.

A claimed task (a PostgreSQL worker's, ``claimed=True``) reserves only resources with a
limit, under the run's lock as above; usage of resources without one — never refused,
never overrun — is recorded as pending in its outcome transaction, without the lock, and
the run's owner posts it (:func:`post_pending`, store/budget_pending.py). Its artifacts'
bytes are counted the same way (:func:`charge`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentctl import amounts
from agentctl.providers.base import Usage
from agentctl.store import budget_pending, budget_repo, budget_reserve_repo
from agentctl.store.engine import SqlRunner

__all__ = [
    "LIMIT_RESOURCES",
    "BudgetDenied",
    "charge",
    "conclude",
    "model_usage",
    "model_worst_case",
    "open_ledger",
    "post_pending",
    "reserve",
    "reserved_by_claimed_task",
    "settle",
    "settle_outcome",
    "snapshot",
]

#: ``runtime.budgets`` field -> ledger resource.
LIMIT_RESOURCES = {
    "maxProviderRequests": "providerRequests",
    "maxTurns": "turns",
    "maxToolCalls": "toolCalls",
    "maxInputTokens": "inputTokens",
    "maxOutputTokens": "outputTokens",
    "maxTotalTokens": "totalTokens",
    "maxProcessOutputBytes": "processOutputBytes",
    "maxArtifactBytes": "artifactBytes",
    "maxCostMicrousd": "costMicrousd",
}
COUNTERS = ("unpricedProviderRequests",)
_FIELDS = {resource: field for field, resource in LIMIT_RESOURCES.items()}


@dataclass(frozen=True)
class BudgetDenied:
    resource: str
    limit: float
    used: float
    reserved: float
    requested: float

    def message(self) -> str:
        def show(units: float) -> str:
            return amounts.amount(self.resource, units)

        return (
            f"budget exceeded: {self.resource} would reach "
            f"{show(self.used + self.reserved + self.requested)} of {show(self.limit)} "
            f"(used {show(self.used)}, reserved {show(self.reserved)}; "
            f"limit runtime.budgets.{_FIELDS.get(self.resource, self.resource)})"
        )

    def overrun_message(self) -> str:
        return (
            f"budget overrun: {self.resource} used {amounts.amount(self.resource, self.used)} of "
            f"{amounts.amount(self.resource, self.limit)} "
            f"(limit runtime.budgets.{_FIELDS.get(self.resource, self.resource)})"
        )


def open_ledger(
    conn: SqlRunner,
    run_id: str,
    limits: Mapping[str, Any],
    now: datetime,
    pricing_version: str | None = None,
) -> None:
    """One row per resource, limits from ``runtime.budgets`` (unset: counted, unlimited)."""
    rows = [(resource, limits.get(field)) for field, resource in LIMIT_RESOURCES.items()] + [
        (counter, None) for counter in COUNTERS
    ]
    budget_repo.insert_ledger(conn, run_id, rows, pricing_version, now)


def _rows(conn: SqlRunner, run_id: str) -> dict[str, budget_repo.LedgerRow]:
    return budget_repo.ledger(conn, run_id)


def reserve(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    units: Mapping[str, float],
    now: datetime,
    *,
    new_effect: bool = False,
) -> BudgetDenied | None:
    """Reserve ``units`` for one effect, all or nothing (the caller's transaction).
    ``new_effect``: the caller journaled the effect in this transaction, so it holds no
    reservation yet and none is looked for."""
    if not new_effect and budget_repo.has_held_reservation(conn, effect_id):
        return None  # a requested-but-never-started effect keeps its reservation
    # One conditional UPDATE checks every limit and moves the ledger (a reservation used
    # to read the ledger first); only a refused one reads it, to say which limit.
    wanted = [(resource, amount) for resource, amount in units.items() if amount > 0]
    if budget_reserve_repo.reserve_within_limits(conn, run_id, effect_id, wanted, now):
        return None
    rows = _rows(conn, run_id)
    for resource, amount in wanted:
        row = rows.get(resource)
        if row is None or row.limit_units is None:
            continue
        if row.used_units + row.reserved_units + amount > row.limit_units:
            return BudgetDenied(
                resource, row.limit_units, row.used_units, row.reserved_units, amount
            )
    return None  # none of these resources has a ledger row: nothing to hold


def settle(
    conn: SqlRunner, run_id: str, effect_id: str, actual: Mapping[str, float], now: datetime
) -> list[BudgetDenied]:
    """Replace the effect's reservations with actual usage; return any overruns."""
    # One UPDATE settles the held reservations (not read first); one more gives them back,
    # adds the usage and returns the ledger rows as they are after it: the limits are
    # checked on them, the ledger is not read again. A resource measured at zero is in it
    # too (it adds nothing), so an overrun it already had is still reported.
    rows = budget_repo.settle_and_add_used(conn, run_id, effect_id, list(actual.items()), now)
    return [
        BudgetDenied(row.resource, row.limit_units, row.used_units, row.reserved_units, 0)
        for row in rows
        if row.resource in actual
        and row.limit_units is not None
        and row.used_units > row.limit_units
    ]


#: The resources without a limit of runs this process executed claimed tasks of: a run's
#: limits are written with its ledger and never change, so they are read once (no lock).
_UNLIMITED: dict[str, frozenset[str]] = {}
_UNLIMITED_RUNS = 256


def _unlimited(conn: SqlRunner, run_id: str) -> frozenset[str]:
    found = _UNLIMITED.get(run_id)
    if found is None:
        found = budget_pending.unlimited(conn, run_id)
        if len(_UNLIMITED) >= _UNLIMITED_RUNS:
            _UNLIMITED.clear()  # read again on next need (a worker's threads share it)
        _UNLIMITED[run_id] = found
    return found


def reserved_by_claimed_task(
    conn: SqlRunner, run_id: str, units: Mapping[str, float]
) -> dict[str, float]:
    """What a claimed task reserves of ``units``: the resources with a limit (one without
    can never refuse it, so it is not reserved: no statement, no run lock)."""
    free = _unlimited(conn, run_id)
    return {resource: amount for resource, amount in units.items() if resource not in free}


def settle_outcome(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    actual: Mapping[str, float],
    now: datetime,
    reserved: bool,
    claimed: bool,
) -> list[BudgetDenied]:
    """Settle an effect's outcome (:func:`settle`; nothing when it measured nothing and
    this gate reserved nothing: ``reserved`` False). ``claimed``: a claimed task's, whose
    usage of resources without a limit is recorded as pending, without the run's lock."""
    if claimed and actual:
        free = _unlimited(conn, run_id)
        pending = [(r, units) for r, units in actual.items() if r in free and units > 0]
        if pending:
            budget_pending.add_pending(conn, run_id, effect_id, pending, now)
        actual = {r: units for r, units in actual.items() if r not in free}
    if not actual and not reserved:
        return []
    return settle(conn, run_id, effect_id, actual, now)


def charge(
    conn: SqlRunner,
    run_id: str,
    key: str,
    units: Mapping[str, float],
    now: datetime,
    *,
    claimed: bool,
) -> BudgetDenied | None:
    """Count usage measured before it is recorded (the bytes of a task's artifacts, ingested
    before its commit), under ``key``: reserved and settled at once in the caller's
    transaction, all or nothing (refused: nothing is held or counted). ``claimed``: a
    claimed task's, which reserves only the resources with a limit and records its usage
    of the others as pending, without the run's lock, as its effects do
    (:func:`reserved_by_claimed_task`, :func:`settle_outcome`)."""
    wanted = reserved_by_claimed_task(conn, run_id, units) if claimed else dict(units)
    if wanted:
        denied = reserve(conn, run_id, key, wanted, now)
        if denied is not None:
            return denied
    settle_outcome(conn, run_id, key, units, now, bool(wanted), claimed)
    return None


def post_pending(conn: SqlRunner, run_id: str, now: datetime) -> None:
    """Post the usage claimed tasks of the run left pending into its ledger, exactly once
    (an owner's write on PostgreSQL, which holds the run's lock)."""
    budget_pending.post_pending(conn, run_id, now)


def conclude(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    *,
    consumed: bool,
    outcome_recorded: bool,
    now: datetime,
) -> None:
    """Settle the reservation of an effect an operator concluded (docs/budgets.md).

    ``consumed`` (applied, compensated): the worst case reserved becomes usage, because
    nothing measured what the effect used and the reservation bounds it. Not consumed
    (not_applied): the reservation is given back. A later conclusion that overturns an
    earlier one moves the same units back, so the ledger always reflects the latest. An
    effect whose outcome was recorded when it returned was settled then, with measured
    usage: a conclusion leaves it alone.
    """
    if outcome_recorded:
        return
    rows = budget_repo.effect_reservations(conn, effect_id)
    held = [row for row in rows if row.status == "held"]
    if consumed:
        budget_repo.move_reservations(
            conn, run_id, held, reserved=-1, used=+1, status="settled", now=now
        )
        released = [row for row in rows if row.status == "released"]
        budget_repo.move_reservations(
            conn, run_id, released, reserved=0, used=+1, status="settled", now=now
        )
    else:
        budget_repo.move_reservations(
            conn, run_id, held, reserved=-1, used=0, status="released", now=now
        )
        counted = [row for row in rows if row.status == "settled"]
        budget_repo.move_reservations(
            conn, run_id, counted, reserved=0, used=-1, status="released", now=now
        )


def snapshot(conn: SqlRunner, run_id: str) -> list[dict[str, Any]]:
    """Limits, reserved and used units per resource (for ``inspect``)."""
    return [
        {
            "resource": resource,
            "limit": row.limit_units,
            "reserved": row.reserved_units,
            "used": row.used_units,
        }
        for resource, row in sorted(_rows(conn, run_id).items())
    ]


def _price(
    pricing: Mapping[str, Any] | None, provider: str, model: str
) -> Mapping[str, Any] | None:
    if not pricing:
        return None
    entry = (pricing.get("models") or {}).get(f"{provider}/{model}")
    return entry if isinstance(entry, Mapping) else None


def _rate(entry: Mapping[str, Any], key: str, fallback: str) -> int:
    value = entry.get(key)
    return int(value if value is not None else entry.get(fallback) or 0)


def model_worst_case(
    request_json: Mapping[str, Any], request_bytes: int, pricing: Mapping[str, Any] | None
) -> dict[str, float]:
    """The reservation for one provider request (docs/budgets.md)."""
    input_tokens = math.ceil(request_bytes / 4)
    output_tokens = int(request_json.get("maxOutputTokens") or 0)
    units: dict[str, float] = {
        "providerRequests": 1,
        "turns": 1,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens,
    }
    entry = _price(pricing, str(request_json.get("provider")), str(request_json.get("model")))
    if entry is not None:
        inp = max(
            _rate(entry, "inputMicrousdPerMillionTokens", ""),
            _rate(entry, "cacheReadMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
            _rate(entry, "cacheWriteMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
        )
        out = max(
            _rate(entry, "outputMicrousdPerMillionTokens", ""),
            _rate(entry, "reasoningMicrousdPerMillionTokens", "outputMicrousdPerMillionTokens"),
        )
        units["costMicrousd"] = math.ceil(input_tokens * inp / 1_000_000) + math.ceil(
            output_tokens * out / 1_000_000
        )
    return units


def model_usage(
    request_json: Mapping[str, Any], response: Mapping[str, Any], pricing: Mapping[str, Any] | None
) -> tuple[dict[str, float], int | None]:
    """Actual usage of one answered request, and its cost in micro-USD when priced."""
    usage = Usage.from_json(response.get("usage") or {})
    input_tokens = usage.input_tokens
    output_tokens = usage.output_tokens
    actual: dict[str, float] = {
        "providerRequests": 1,
        "turns": 1,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens,
    }
    entry = _price(pricing, str(request_json.get("provider")), str(request_json.get("model")))
    if entry is None:
        actual["unpricedProviderRequests"] = 1
        return actual, None
    cache_read = usage.cache_read_tokens
    cache_write = usage.cache_write_tokens
    reasoning = usage.reasoning_tokens
    plain_input = max(0, input_tokens - cache_read - cache_write)
    plain_output = max(0, output_tokens - reasoning)

    def cost(tokens: int, rate: int) -> int:
        return math.ceil(tokens * rate / 1_000_000)

    total = (
        cost(plain_input, _rate(entry, "inputMicrousdPerMillionTokens", ""))
        + cost(
            cache_read,
            _rate(entry, "cacheReadMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
        )
        + cost(
            cache_write,
            _rate(entry, "cacheWriteMicrousdPerMillionTokens", "inputMicrousdPerMillionTokens"),
        )
        + cost(plain_output, _rate(entry, "outputMicrousdPerMillionTokens", ""))
        + cost(
            reasoning,
            _rate(entry, "reasoningMicrousdPerMillionTokens", "outputMicrousdPerMillionTokens"),
        )
    )
    actual["costMicrousd"] = total
    return actual, total
