"""Reserving an effect's worst case within the run's limits: the one conditional ``UPDATE``
of the run's ledger rows (and ``INSERT`` of the reservations it held) that the gate runs
before a fresh dispatch (docs/budgets.md). The ledger's rows, what reservations hold and
how they are settled are :mod:`agentctl.store.budget_repo`'s.

As every writer of a run's ledger, a reservation holds the run's lock first
(:func:`agentctl.store.locks.hold_run`): workers reserving for one run see each other's
reservations, and the limit check and the move see the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import locks
from agentctl.store.budget_repo import amount_of, by_resource
from agentctl.store.dialect import sql_dialect
from agentctl.store.statements import Statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["reserve_within_limits"]


def reserve_within_limits(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    amounts: Sequence[tuple[str, float]],
    now: datetime,
) -> bool:
    """Hold each ``(resource, amount)`` (distinct resources, positive amounts) for one
    effect unless one of them would pass its limit: all or nothing, the limits checked and
    the ledger moved by one conditional ``UPDATE`` (no read of the ledger first), and one
    ``INSERT`` of the reservations of the rows it moved (on PostgreSQL both in one
    statement, the ``UPDATE`` in its ``WITH``). A resource the run has no ledger
    row for is not reserved. False: nothing was held and the run's ledger has a row of one
    of these resources (a limit refused it; the caller reads the ledger to say which)."""
    if not amounts:
        return True
    locks.hold_run(conn, run_id)
    values = by_resource(run_id, amounts, to_db(now))
    if sql_dialect(conn.dialect.name).writes_in_with:
        # One statement: the reservations inserted are those of the rows the UPDATE moved.
        held_rows = _reserve_and_hold(len(amounts)).run(conn, effect_id=effect_id, **values)
        return held_rows.first() is not None
    moved = [row[0] for row in _reserve_checked(len(amounts)).run(conn, **values)]
    if not moved:
        return False
    held = [(resource, amount) for resource, amount in amounts if resource in set(moved)]
    _insert_reservations(len(held)).run(
        conn, effect_id=effect_id, **by_resource(run_id, held, to_db(now))
    )
    return True


@lru_cache(maxsize=16)
def _insert_reservations(count: int) -> Statement:
    """``count`` held reservations of one effect in one ``INSERT``."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, insert

        from agentctl.store.journal_tables import budget_reservations

        rows = [
            {
                "run_id": bindparam("run_id"),
                "resource": bindparam(f"resource_{n}"),
                "effect_id": bindparam("effect_id"),
                "units": bindparam(f"amount_{n}"),
                "status": "held",
                "created_at": bindparam("stamp"),
            }
            for n in range(count)
        ]
        return insert(budget_reservations).values(rows)

    return Statement(build, f"insert_reservations({count})")


def _reserve_update(count: int) -> Any:
    """``UPDATE budgets SET reserved_units = reserved_units + amount`` over ``count``
    resources of one run ``WHERE NOT EXISTS`` a row of them whose ``used + reserved +
    amount`` passes its limit, ``RETURNING`` the resources moved. The run's lock is held
    (every writer of its ledger holds it), so the check and the move see the same rows."""
    from sqlalchemy import and_, bindparam, exists, select, update

    from agentctl.store.journal_tables import budgets

    c = budgets.c
    o = budgets.alias("over").c
    resources: list[Any] = [bindparam(f"resource_{n}") for n in range(count)]
    over = exists(
        select(o.resource).where(
            and_(
                o.run_id == bindparam("run_id"),
                o.resource.in_(resources),
                o.limit_units.is_not(None),
                o.used_units + o.reserved_units + amount_of(o.resource, count) > o.limit_units,
            )
        )
    )
    return (
        update(budgets)
        .where(c.run_id == bindparam("run_id"), c.resource.in_(resources), ~over)
        .values(
            reserved_units=c.reserved_units + amount_of(c.resource, count),
            updated_at=bindparam("stamp"),
        )
        .returning(c.resource)
    )


@lru_cache(maxsize=32)
def _reserve_checked(count: int) -> Statement:
    """:func:`_reserve_update` alone (SQLite; the reservations are inserted after it)."""

    def build(_: SqlDialect) -> Executable:
        return _reserve_update(count)  # type: ignore[no-any-return]

    return Statement(build, f"reserve_checked({count})")


@lru_cache(maxsize=32)
def _reserve_and_hold(count: int) -> Statement:
    """:func:`_reserve_update` in a ``WITH``, and the ``INSERT`` of one held reservation
    per row it moved (``RETURNING`` their resources: none when a limit refused)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, insert, literal, select

        from agentctl.store.journal_tables import budget_reservations

        moved = _reserve_update(count).cte("moved")
        rows = select(
            bindparam("run_id"),
            moved.c.resource,
            bindparam("effect_id"),
            amount_of(moved.c.resource, count),
            literal("held"),
            bindparam("stamp"),
        )
        columns = ["run_id", "resource", "effect_id", "units", "status", "created_at"]
        return (
            insert(budget_reservations)
            .from_select(columns, rows)
            .returning(budget_reservations.c.resource)
        )

    return Statement(build, f"reserve_and_hold({count})")
