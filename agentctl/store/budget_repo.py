"""The run's resource ledger rows: one ``budgets`` row per resource, and the reservations
held against it by effects. Every function runs in the caller's transaction; the gate
reserves in the transaction that journals the effect and settles in the one that records
its outcome."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from agentctl.store.engine import SqlRunner

__all__ = [
    "LedgerRow",
    "ReservationRow",
    "add_used",
    "has_held_reservation",
    "held_reservations",
    "insert_ledger",
    "ledger",
    "reserve_units",
    "settle_reservation",
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


def reserve_units(
    conn: SqlRunner, run_id: str, effect_id: str, resource: str, amount: float, now: datetime
) -> None:
    """Hold ``amount`` of ``resource`` for one effect."""
    stamp = to_db(now)
    conn.exec_driver_sql(
        "UPDATE budgets SET reserved_units = reserved_units + ?, updated_at = ? "
        "WHERE run_id = ? AND resource = ?",
        (amount, stamp, run_id, resource),
    )
    conn.exec_driver_sql(
        "INSERT INTO budget_reservations (run_id, resource, effect_id, units, status, "
        "created_at) VALUES (?, ?, ?, ?, 'held', ?)",
        (run_id, resource, effect_id, amount, stamp),
    )


def settle_reservation(
    conn: SqlRunner, run_id: str, reservation: ReservationRow, now: datetime
) -> None:
    """Give a held reservation back to the ledger and mark it settled."""
    stamp = to_db(now)
    conn.exec_driver_sql(
        "UPDATE budgets SET reserved_units = reserved_units - ?, updated_at = ? "
        "WHERE run_id = ? AND resource = ?",
        (reservation.units, stamp, run_id, reservation.resource),
    )
    conn.exec_driver_sql(
        "UPDATE budget_reservations SET status = 'settled', settled_at = ? WHERE id = ?",
        (stamp, reservation.id),
    )


def add_used(conn: SqlRunner, run_id: str, resource: str, amount: float, now: datetime) -> None:
    conn.exec_driver_sql(
        "UPDATE budgets SET used_units = used_units + ?, updated_at = ? "
        "WHERE run_id = ? AND resource = ?",
        (amount, to_db(now), run_id, resource),
    )
