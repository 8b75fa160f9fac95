"""Exclusive claims decided inside one write transaction.

``claim_compensation`` makes "one compensation of a source run at a time" hold by
construction: it runs in the IMMEDIATE transaction that creates the compensation run, so
of two ``agentctl compensate`` commands that planned at the same moment, the second sees
the first's run (or the conclusions the first already appended) and creates nothing. A
partial unique index on ``runs`` backs the rule up in the database itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentctl import hints
from agentctl.errors import BlockedError
from agentctl.store.statements import one_of, statement

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = ["claim_compensation"]


def claim_compensation(conn: Any, source_run_id: str, effect_ids: Iterable[str]) -> None:
    live = _live_compensation.run(conn, source_run_id=source_run_id).first()
    if live is not None:
        raise BlockedError(
            f"run {source_run_id} is already being compensated by run {live[0]} ({live[1]})",
            code="compensation.in_progress",
            hint=f"follow it with {hints.quoted(hints.inspect(live[0]))}"
            + (
                f", or continue it with {hints.quoted(hints.resume(live[0]))}"
                if live[1] == "paused"
                else ""
            ),
            run_id=source_run_id,
        )
    for effect_id in effect_ids:
        concluded = _latest_conclusion.run(conn, effect_id=effect_id).first()
        if concluded is not None and concluded[0] in ("compensated", "not_applied"):
            raise BlockedError(
                f"effect {effect_id} of run {source_run_id} was concluded {concluded[0]} "
                f"after this compensation was planned ({concluded[1]}); nothing was started",
                code="compensation.in_progress",
                hint=f"plan again with {hints.quoted(hints.compensate(source_run_id) + ' --plan')}",
                run_id=source_run_id,
            )


@statement
def _live_compensation(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs

    c = runs.c
    return (
        select(c.id, c.status)
        .where(
            c.source_run_id == bindparam("source_run_id"),
            c.mode == "compensate",
            one_of(c.status, ("running", "paused")),
        )
        .order_by(c.created_at)
        .limit(1)
    )


@statement
def _latest_conclusion(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.journal_tables import reconciliations

    c = reconciliations.c
    return (
        select(c.status, c.reason)
        .where(c.effect_id == bindparam("effect_id"))
        .order_by(c.id.desc())
        .limit(1)
    )
