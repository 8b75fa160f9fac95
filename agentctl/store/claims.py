"""Exclusive claims decided inside one write transaction.

``claim_compensation`` makes "one compensation of a source run at a time" hold by
construction: it runs in the IMMEDIATE transaction that creates the compensation run, so
of two ``agentctl compensate`` commands that planned at the same moment, the second sees
the first's run (or the conclusions the first already appended) and creates nothing. A
partial unique index on ``runs`` backs the rule up in the database itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentctl import hints
from agentctl.errors import BlockedError

__all__ = ["claim_compensation"]


def claim_compensation(conn: Any, source_run_id: str, effect_ids: Iterable[str]) -> None:
    live = conn.exec_driver_sql(
        "SELECT id, status FROM runs WHERE source_run_id = ? AND mode = 'compensate' "
        "AND status IN ('running', 'paused') ORDER BY created_at LIMIT 1",
        (source_run_id,),
    ).first()
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
        concluded = conn.exec_driver_sql(
            "SELECT status, reason FROM reconciliations WHERE effect_id = ? "
            "ORDER BY id DESC LIMIT 1",
            (effect_id,),
        ).first()
        if concluded is not None and concluded[0] in ("compensated", "not_applied"):
            raise BlockedError(
                f"effect {effect_id} of run {source_run_id} was concluded {concluded[0]} "
                f"after this compensation was planned ({concluded[1]}); nothing was started",
                code="compensation.in_progress",
                hint=f"plan again with {hints.quoted(hints.compensate(source_run_id) + ' --plan')}",
                run_id=source_run_id,
            )
