"""Pending usage: what a claimed task (a PostgreSQL worker) measured of resources that
have no limit, waiting to be posted into its run's ledger (docs/budgets.md, "Workers").

A reservation of a resource without a limit can never be refused and its usage can never
overrun, so a claimed task's writes need no run lock for it: the worker records what it
measured as ``budget_pending_usage`` rows in its fenced outcome transaction (no read, no
lock), and the run's owner, in one of its writes (which hold the run's lock from their
``BEGIN``), adds them to ``budgets.used_units`` and deletes them in one statement: posted
exactly once, since the addition and the deletion commit together. Readers of the ledger
count the rows not posted yet (:func:`agentctl.store.budget_repo.ledger`).

A run's limits are written once, with its ledger (``budget_repo.insert_ledger``), and
never changed, so :func:`unlimited` is read without the run's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from agentctl.store.statements import statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["add_pending", "post_pending", "unlimited"]


def unlimited(conn: SqlRunner, run_id: str) -> frozenset[str]:
    """The run's ledger resources without a limit (no lock: limits never change)."""
    return frozenset(row[0] for row in _unlimited.run(conn, run_id=run_id))


@statement
def _unlimited(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import budgets

    c = budgets.c
    return select(c.resource).where(c.run_id == bindparam("run_id"), c.limit_units.is_(None))


def add_pending(
    conn: SqlRunner,
    run_id: str,
    effect_id: str,
    amounts: Sequence[tuple[str, float]],
    now: datetime,
) -> None:
    """Record ``amounts`` (resources without a limit) measured by one effect, unposted."""
    stamp = to_db(now)
    _add_pending.run_many(
        conn,
        (
            {
                "run_id": run_id,
                "resource": resource,
                "effect_id": effect_id,
                "units": units,
                "created_at": stamp,
            }
            for resource, units in amounts
        ),
    )


@statement
def _add_pending(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, insert

    from agentctl.store.journal_tables import budget_pending_usage

    given = ("run_id", "resource", "effect_id", "units", "created_at")
    return insert(budget_pending_usage).values(**{name: bindparam(name) for name in given})


def post_pending(conn: SqlRunner, run_id: str, now: datetime) -> None:
    """Post the run's pending usage into its ledger (PostgreSQL: only workers write it):
    one statement deletes the rows in its ``WITH`` and adds their sums per resource to
    ``used_units``. The caller holds the run's lock (an owner's write)."""
    _post_pending.run(conn, run_id=run_id, stamp=to_db(now))


@statement
def _post_pending(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete, func, select, update

    from agentctl.store.journal_tables import budget_pending_usage, budgets

    p = budget_pending_usage.c
    gone = (
        delete(budget_pending_usage)
        .where(p.run_id == bindparam("run_id"))
        .returning(p.resource, p.units)
        .cte("gone")
    )
    sums = (
        select(gone.c.resource, func.sum(gone.c.units).label("units"))
        .group_by(gone.c.resource)
        .cte("sums")
    )
    c = budgets.c
    return (
        update(budgets)
        .where(c.run_id == bindparam("run_id"), c.resource == sums.c.resource)
        .values(used_units=c.used_units + sums.c.units, updated_at=bindparam("stamp"))
    )
