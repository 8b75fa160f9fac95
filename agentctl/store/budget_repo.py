"""The run's resource ledger rows: one ``budgets`` row per resource, and the reservations
held against it by effects. Every function runs in the caller's transaction; the gate
reserves in the transaction that journals the effect (the reservation's conditional
``UPDATE`` is :mod:`agentctl.store.budget_reserve_repo`'s) and settles in the one that
records its outcome.

A run's ledger rows are decided on read-then-write (a reservation checks the limit against
what is used and held), so every function that reads or moves them holds the run's lock
first (:func:`agentctl.store.locks.hold_run`: a no-op for a transaction that holds it from
its ``BEGIN``, the late lock of a claimed task's write otherwise): workers reserving for
one run see each other's reservations. An effect's own reservation rows are its holder's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import locks
from agentctl.store.dialect import sql_dialect
from agentctl.store.statements import Statement, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable, Update

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = [
    "LedgerRow",
    "ReservationRow",
    "add_used",
    "amount_of",
    "by_resource",
    "effect_reservations",
    "has_held_reservation",
    "held_reservations",
    "insert_ledger",
    "ledger",
    "move_reservations",
    "settle_and_add_used",
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
    _insert_ledger.run_many(
        conn,
        (
            {
                "run_id": run_id,
                "resource": resource,
                "limit_units": limit,
                "pricing_version": pricing_version,
                "updated_at": stamp,
            }
            for resource, limit in limits
        ),
    )


@statement
def _insert_ledger(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert, literal

    from agentctl.store.journal_tables import budgets

    given = ("run_id", "resource", "limit_units", "pricing_version", "updated_at")
    return insert(budgets).values(
        **{name: bindparam(name) for name in given},
        reserved_units=literal(0),
        used_units=literal(0),
    )


def ledger(conn: SqlRunner, run_id: str) -> dict[str, LedgerRow]:
    locks.hold_run(conn, run_id)
    return {row.resource: row for row in map(_ledger_row, _ledger.run(conn, run_id=run_id))}


def _ledger_row(row: Any) -> LedgerRow:
    """A ledger row as :data:`_ledger` and :func:`_add_used` return its columns."""
    return LedgerRow(
        row[0], None if row[1] is None else float(row[1]), float(row[2]), float(row[3]), row[4]
    )


@statement
def _ledger(_: SqlDialect) -> Executable:
    """The run's ledger rows, each resource's used units counting its pending usage (what
    claimed tasks measured of it, not posted by the run's owner yet: budget_pending.py)."""
    from sqlalchemy import bindparam, func, select

    from agentctl.store.journal_tables import budget_pending_usage, budgets

    c = budgets.c
    p = budget_pending_usage.c
    pending = (
        select(func.coalesce(func.sum(p.units), 0.0))
        .where(p.run_id == c.run_id, p.resource == c.resource)
        .scalar_subquery()
    )
    return select(
        c.resource, c.limit_units, c.reserved_units, c.used_units + pending, c.pricing_version
    ).where(c.run_id == bindparam("run_id"))


def has_held_reservation(conn: SqlRunner, effect_id: str) -> bool:
    return _held.run(conn, effect_id=effect_id).first() is not None


def held_reservations(conn: SqlRunner, effect_id: str) -> list[ReservationRow]:
    rows = _held.run(conn, effect_id=effect_id)
    return [ReservationRow(int(row[0]), row[1], float(row[2])) for row in rows]


@statement
def _held(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import budget_reservations

    c = budget_reservations.c
    return select(c.id, c.resource, c.units).where(
        c.effect_id == bindparam("effect_id"), c.status == "held"
    )


def effect_reservations(conn: SqlRunner, effect_id: str) -> list[ReservationRow]:
    """Every reservation an effect made, whatever became of it."""
    rows = _effect_reservations.run(conn, effect_id=effect_id)
    return [ReservationRow(int(row[0]), row[1], float(row[2]), row[3]) for row in rows]


@statement
def _effect_reservations(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import budget_reservations

    c = budget_reservations.c
    return (
        select(c.id, c.resource, c.units, c.status)
        .where(c.effect_id == bindparam("effect_id"))
        .order_by(c.id)
    )


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
    if reservations:
        locks.hold_run(conn, run_id)
    stamp = to_db(now)
    for reservation in reservations:
        _move_units.run(
            conn,
            reserved=reserved * reservation.units,
            used=used * reservation.units,
            stamp=stamp,
            run_id=run_id,
            resource=reservation.resource,
        )
        _mark_reservation.run(conn, status=status, stamp=stamp, id=reservation.id)


@statement
def _move_units(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.journal_tables import budgets

    c = budgets.c
    return (
        update(budgets)
        .where(c.run_id == bindparam("run_id"), c.resource == bindparam("resource"))
        .values(
            reserved_units=c.reserved_units + bindparam("reserved"),
            used_units=c.used_units + bindparam("used"),
            updated_at=bindparam("stamp"),
        )
    )


@statement
def _mark_reservation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.journal_tables import budget_reservations

    return (
        update(budget_reservations)
        .where(budget_reservations.c.id == bindparam("id"))
        .values(status=bindparam("status"), settled_at=bindparam("stamp"))
    )


def by_resource(run_id: str, amounts: Sequence[tuple[str, float]], stamp: str) -> dict[str, Any]:
    """The parameters of a statement over several resources of one run (:func:`_change_units`,
    a reservation's in budget_reserve_repo): ``resource_N`` and ``amount_N`` per pair of
    ``amounts``."""
    values: dict[str, Any] = {"run_id": run_id, "stamp": stamp}
    for n, (resource, amount) in enumerate(amounts):
        values[f"resource_{n}"] = resource
        values[f"amount_{n}"] = amount
    return values


@lru_cache(maxsize=32)
def _change_units(column: str, sign: int, count: int) -> Statement:
    """``UPDATE budgets SET column = column ± CASE resource WHEN ? THEN ? … END`` over
    ``count`` distinct resources of one run: one statement changes the ledger rows of
    several resources (a model call reserves and uses five)."""

    def build(_: SqlDialect) -> Executable:
        return _units_update(column, sign, count)

    return Statement(build, f"change_units({column}, {sign}, {count})")


def _units_update(column: str, sign: int, count: int) -> Update:
    """The ``UPDATE`` of :func:`_change_units` (parameters: :func:`by_resource`)."""
    from sqlalchemy import bindparam, case, update

    from agentctl.store.journal_tables import budgets

    c = budgets.c
    resources: list[Any] = [bindparam(f"resource_{n}") for n in range(count)]
    by_resource = case(
        *((resources[n], bindparam(f"amount_{n}")) for n in range(count)),
        value=c.resource,
    )
    current = c[column]
    return (
        update(budgets)
        .where(c.run_id == bindparam("run_id"), c.resource.in_(resources))
        .values(
            {
                column: current + by_resource if sign > 0 else current - by_resource,
                "updated_at": bindparam("stamp"),
            }
        )
    )


def amount_of(column: Any, count: int, name: str = "amount") -> Any:
    """``CASE column WHEN :resource_0 THEN :{name}_0 … END`` over ``count`` resources."""
    from sqlalchemy import bindparam, case

    return case(
        *((bindparam(f"resource_{n}"), bindparam(f"{name}_{n}")) for n in range(count)),
        value=column,
    )


def _give_back(
    conn: SqlRunner, run_id: str, reservations: Sequence[ReservationRow], stamp: str
) -> None:
    """Give the reservations' units back to the ledger (their rows are left as they are)."""
    if not reservations:
        return
    locks.hold_run(conn, run_id)
    resources = [r.resource for r in reservations]
    if len(set(resources)) == len(resources):
        values = by_resource(run_id, [(r.resource, r.units) for r in reservations], stamp)
        _change_units("reserved_units", -1, len(reservations)).run(conn, **values)
    else:  # two reservations of one resource: given back one by one, as they were held
        for reservation in reservations:
            _move_units.run(
                conn,
                reserved=-reservation.units,
                used=0,
                stamp=stamp,
                run_id=run_id,
                resource=reservation.resource,
            )


def settle_and_add_used(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    amounts: Sequence[tuple[str, float]],
    now: datetime,
) -> list[LedgerRow]:
    """Settle the effect's held reservations (give them back, mark them settled), then count
    ``amounts`` as used (:func:`add_used`): the ledger rows the usage moved, as they are
    after both. On PostgreSQL that is one statement (:func:`_settle_in_one`). On SQLite the
    reservations are marked settled by one ``UPDATE … RETURNING`` (they are not read
    first); reservations of distinct resources (one per resource, as a reservation holds
    them) and the usage then move the ledger in one ``UPDATE … RETURNING``, each row's
    reserved units given back and its used units added at once."""
    stamp = to_db(now)
    if sql_dialect(conn.dialect.name).writes_in_with:
        return _settle_in_one(conn, run_id, effect_id, amounts, stamp)
    reservations = [
        ReservationRow(int(row[0]), row[1], float(row[2]))
        for row in _settle_held.run(conn, effect_id=effect_id, stamp=stamp)
    ]
    resources = [r.resource for r in reservations]
    if not reservations or not amounts or len(set(resources)) != len(resources):
        _give_back(conn, run_id, reservations, stamp)
        return add_used(conn, run_id, amounts, now)
    locks.hold_run(conn, run_id)
    given = {r.resource: r.units for r in reservations}
    used = dict(amounts)
    values: dict[str, Any] = {"run_id": run_id, "stamp": stamp}
    for n, resource in enumerate(dict.fromkeys([*given, *used])):
        values[f"resource_{n}"] = resource
        values[f"given_{n}"] = given.get(resource, 0.0)
        values[f"used_{n}"] = used.get(resource, 0.0)
    count = (len(values) - 2) // 3  # run_id and stamp, then three per resource
    moved = [_ledger_row(row) for row in _give_back_and_use(count).run(conn, **values)]
    return [row for row in moved if row.resource in used]


def _settle_in_one(
    conn: SqlRunner, run_id: str, effect_id: str, amounts: Sequence[tuple[str, float]], stamp: str
) -> list[LedgerRow]:
    """:func:`settle_and_add_used` in one statement (PostgreSQL): the held reservations
    settled in its ``WITH``, given back and the usage added by its ``UPDATE``, under the
    run's lock (the reservations' own rows were settled before it; one statement now)."""
    locks.hold_run(conn, run_id)
    values: dict[str, Any] = {"run_id": run_id, "effect_id": effect_id, "stamp": stamp}
    for n, (resource, amount) in enumerate(amounts):
        values[f"resource_{n}"] = resource
        values[f"used_{n}"] = amount
    found = _settle_and_use(len(amounts)).run(conn, **values)
    used = {resource for resource, _ in amounts}
    return [row for row in map(_ledger_row, found) if row.resource in used]


@statement
def _settle_held(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.journal_tables import budget_reservations

    c = budget_reservations.c
    return (
        update(budget_reservations)
        .where(c.effect_id == bindparam("effect_id"), c.status == "held")
        .values(status="settled", settled_at=bindparam("stamp"))
        .returning(c.id, c.resource, c.units)
    )


@lru_cache(maxsize=16)
def _settle_and_use(count: int) -> Statement:
    """PostgreSQL: the effect's held reservations marked settled in a ``WITH``
    (``effect_id``), then one ``UPDATE budgets`` giving each resource's settled units back
    (summed, so two reservations of one resource are both given back) and adding
    ``used_N`` of ``count`` resources (``resource_N``), ``RETURNING`` the rows it moved as
    after it: those of the reservations and those of the usage."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, func, or_, select, update

        from agentctl.store.journal_tables import budget_reservations, budgets

        r = budget_reservations.c
        settled = (
            update(budget_reservations)
            .where(r.effect_id == bindparam("effect_id"), r.status == "held")
            .values(status="settled", settled_at=bindparam("stamp"))
            .returning(r.resource, r.units)
            .cte("settled")
        )
        c = budgets.c
        given = (
            select(func.coalesce(func.sum(settled.c.units), 0.0))
            .where(settled.c.resource == c.resource)
            .scalar_subquery()
        )
        touched: Any = c.resource.in_(select(settled.c.resource))
        values: dict[str, Any] = {
            "reserved_units": c.reserved_units - given,
            "updated_at": bindparam("stamp"),
        }
        if count:
            used = amount_of(c.resource, count, "used")
            values["used_units"] = c.used_units + func.coalesce(used, 0.0)
            listed = c.resource.in_([bindparam(f"resource_{n}") for n in range(count)])
            touched = or_(listed, touched)
        return (
            update(budgets)
            .where(c.run_id == bindparam("run_id"), touched)
            .values(**values)
            .returning(c.resource, c.limit_units, c.reserved_units, c.used_units, c.pricing_version)
        )

    return Statement(build, f"settle_and_use({count})")


@lru_cache(maxsize=16)
def _give_back_and_use(count: int) -> Statement:
    """``UPDATE budgets SET reserved_units = reserved_units - given, used_units =
    used_units + used`` over ``count`` resources of one run (``resource_N``, ``given_N``,
    ``used_N``; zero where a resource has none), ``RETURNING`` the rows as after it."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, case, update

        from agentctl.store.journal_tables import budgets

        c = budgets.c
        resources: list[Any] = [bindparam(f"resource_{n}") for n in range(count)]

        def by_resource(name: str) -> Any:
            return case(
                *((resources[n], bindparam(f"{name}_{n}")) for n in range(count)),
                value=c.resource,
            )

        return (
            update(budgets)
            .where(c.run_id == bindparam("run_id"), c.resource.in_(resources))
            .values(
                reserved_units=c.reserved_units - by_resource("given"),
                used_units=c.used_units + by_resource("used"),
                updated_at=bindparam("stamp"),
            )
            .returning(c.resource, c.limit_units, c.reserved_units, c.used_units, c.pricing_version)
        )

    return Statement(build, f"give_back_and_use({count})")


def add_used(
    conn: SqlRunner, run_id: str, amounts: Sequence[tuple[str, float]], now: datetime
) -> list[LedgerRow]:
    """Count each ``(resource, amount)`` as used (distinct resources); the ledger rows it
    moved, as they are after it (one ``UPDATE … RETURNING``: the caller checks them
    against their limits without reading the ledger again)."""
    if not amounts:
        return []
    locks.hold_run(conn, run_id)
    values = by_resource(run_id, amounts, to_db(now))
    return [_ledger_row(row) for row in _add_used(len(amounts)).run(conn, **values)]


@lru_cache(maxsize=16)
def _add_used(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from agentctl.store.journal_tables import budgets

        c = budgets.c
        return _units_update("used_units", 1, count).returning(
            c.resource, c.limit_units, c.reserved_units, c.used_units, c.pricing_version
        )

    return Statement(build, f"add_used({count})")
