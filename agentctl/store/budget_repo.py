"""The run's resource ledger rows: one ``budgets`` row per resource, and the reservations
held against it by effects. Every function runs in the caller's transaction; the gate
reserves in the transaction that journals the effect and settles in the one that records
its outcome."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.runner import SqlRunner

__all__ = [
    "LedgerRow",
    "ReservationRow",
    "add_used",
    "effect_reservations",
    "has_held_reservation",
    "held_reservations",
    "insert_ledger",
    "ledger",
    "move_reservations",
    "reserve_units",
    "settle_reservations",
]


@dataclass(frozen=True, slots=True)
class LedgerRow:
    resource: str
    limit_units: float | None
    reserved_units: float
    used_units: float
    pricing_version: str | None


@dataclass(frozen=True, slots=True)
class ReservationRow:
    id: int
    resource: str
    units: float
    status: str = "held"


def insert_ledger(
    conn: SqlRunner,
    run_id: str,
    limits: Iterable[tuple[str, Any]],
    pricing_version: str | None,
    now: datetime,
) -> None:
    """One row per ``(resource, limit)`` (a None limit: counted, unlimited)."""
    stamp = to_db(now)
    for resource, limit in limits:
        conn.exec_driver_sql(
            "INSERT INTO budgets (run_id, resource, limit_units, reserved_units, used_units, "
            "pricing_version, updated_at) VALUES (?, ?, ?, 0, 0, ?, ?)",
            (run_id, resource, limit, pricing_version, stamp),
        )


def ledger(conn: SqlRunner, run_id: str) -> dict[str, LedgerRow]:
    rows = conn.exec_driver_sql(
        "SELECT resource, limit_units, reserved_units, used_units, pricing_version "
        "FROM budgets WHERE run_id = ?",
        (run_id,),
    )
    return {
        row[0]: LedgerRow(
            row[0], None if row[1] is None else float(row[1]), float(row[2]), float(row[3]), row[4]
        )
        for row in rows
    }


def has_held_reservation(conn: SqlRunner, effect_id: str) -> bool:
    row = conn.exec_driver_sql(
        "SELECT id FROM budget_reservations WHERE effect_id = ? AND status = 'held'",
        (effect_id,),
    ).first()
    return row is not None


def held_reservations(conn: SqlRunner, effect_id: str) -> list[ReservationRow]:
    rows = conn.exec_driver_sql(
        "SELECT id, resource, units FROM budget_reservations "
        "WHERE effect_id = ? AND status = 'held'",
        (effect_id,),
    )
    return [ReservationRow(int(row[0]), row[1], float(row[2])) for row in rows]


def effect_reservations(conn: SqlRunner, effect_id: str) -> list[ReservationRow]:
    """Every reservation an effect made, whatever became of it."""
    rows = conn.exec_driver_sql(
        "SELECT id, resource, units, status FROM budget_reservations WHERE effect_id = ? "
        "ORDER BY id",
        (effect_id,),
    )
    return [ReservationRow(int(row[0]), row[1], float(row[2]), row[3]) for row in rows]


def move_reservations(
    conn: SqlRunner,
    run_id: str,
    reservations: Sequence[ReservationRow],
    *,
    reserved: int,
    used: int,
    status: str,
    now: datetime,
) -> None:
    """Move each reservation's units on the ledger (``reserved`` and ``used`` are -1, 0 or
    +1 times the units) and mark it ``status``, one reservation at a time."""
    stamp = to_db(now)
    for reservation in reservations:
        conn.exec_driver_sql(
            "UPDATE budgets SET reserved_units = reserved_units + ?, "
            "used_units = used_units + ?, updated_at = ? WHERE run_id = ? AND resource = ?",
            (
                reserved * reservation.units,
                used * reservation.units,
                stamp,
                run_id,
                reservation.resource,
            ),
        )
        conn.exec_driver_sql(
            "UPDATE budget_reservations SET status = ?, settled_at = ? WHERE id = ?",
            (status, stamp, reservation.id),
        )


def _by_resource(amounts: Sequence[tuple[str, float]]) -> tuple[str, list[Any]]:
    """``CASE resource WHEN ? THEN ? … END`` and its parameters: one statement changes the
    ledger rows of several resources (a model call reserves and uses five)."""
    text = "CASE resource " + " ".join("WHEN ? THEN ?" for _ in amounts) + " END"
    return text, [value for pair in amounts for value in pair]


def _marks(count: int) -> str:
    return ", ".join("?" for _ in range(count))


def reserve_units(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    amounts: Sequence[tuple[str, float]],
    now: datetime,
) -> None:
    """Hold each ``(resource, amount)`` for one effect (distinct resources)."""
    if not amounts:
        return
    stamp = to_db(now)
    case, values = _by_resource(amounts)
    resources = [resource for resource, _ in amounts]
    conn.exec_driver_sql(
        f"UPDATE budgets SET reserved_units = reserved_units + {case}, updated_at = ? "  # noqa: S608
        f"WHERE run_id = ? AND resource IN ({_marks(len(resources))})",
        (*values, stamp, run_id, *resources),
    )
    conn.exec_driver_sql(
        "INSERT INTO budget_reservations (run_id, resource, effect_id, units, status, "  # noqa: S608
        "created_at) VALUES " + ", ".join("(?, ?, ?, ?, 'held', ?)" for _ in amounts),
        tuple(
            value
            for resource, amount in amounts
            for value in (run_id, resource, effect_id, amount, stamp)
        ),
    )


def settle_reservations(
    conn: SqlRunner, run_id: str, reservations: Sequence[ReservationRow], now: datetime
) -> None:
    """Give held reservations back to the ledger and mark them settled."""
    if not reservations:
        return
    stamp = to_db(now)
    resources = [r.resource for r in reservations]
    if len(set(resources)) == len(resources):
        case, values = _by_resource([(r.resource, r.units) for r in reservations])
        conn.exec_driver_sql(
            f"UPDATE budgets SET reserved_units = reserved_units - {case}, updated_at = ? "  # noqa: S608
            f"WHERE run_id = ? AND resource IN ({_marks(len(resources))})",
            (*values, stamp, run_id, *resources),
        )
    else:  # two reservations of one resource: given back one by one, as they were held
        for reservation in reservations:
            conn.exec_driver_sql(
                "UPDATE budgets SET reserved_units = reserved_units - ?, updated_at = ? "
                "WHERE run_id = ? AND resource = ?",
                (reservation.units, stamp, run_id, reservation.resource),
            )
    ids = [r.id for r in reservations]
    conn.exec_driver_sql(
        "UPDATE budget_reservations SET status = 'settled', settled_at = ? "  # noqa: S608
        f"WHERE id IN ({_marks(len(ids))})",
        (stamp, *ids),
    )


def add_used(
    conn: SqlRunner, run_id: str, amounts: Sequence[tuple[str, float]], now: datetime
) -> None:
    """Count each ``(resource, amount)`` as used (distinct resources)."""
    if not amounts:
        return
    case, values = _by_resource(amounts)
    resources = [resource for resource, _ in amounts]
    conn.exec_driver_sql(
        f"UPDATE budgets SET used_units = used_units + {case}, updated_at = ? "  # noqa: S608
        f"WHERE run_id = ? AND resource IN ({_marks(len(resources))})",
        (*values, to_db(now), run_id, *resources),
    )
