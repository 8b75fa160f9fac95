"""Adoption: which parked runs may be continued by a process other than the one that parked
them, once a person gave what they waited for.

One rule, used by the daemon (which resumes answered runs on its host) and by
``agentctl worker`` (which resumes them on whichever host sees the answer first):

- the run is ``paused``;
- none of its approvals or questions is still pending, and at least one was decided after
  the run parked (a run parked by a ``pause`` step or an uncertain effect waits for an
  operator's ``resume``, not for an answer);
- its previous owner is gone (:func:`agentctl.store.ownership.holder_gone`): no owner
  recorded, an owner process on this host that no longer exists, or an owner on another
  host whose lease has run out.

The dashboard asks the same question about one run when it records an answer or a
reconciliation (:func:`may_adopt`): there the answer has just been given, and a run still
``running`` under an owner that is gone (a killed ``roll``) is a candidate too, once the
caller has checked that no effect it left is still in doubt.

The rule only selects candidates. Taking the run is the ordinary ownership claim, inside
the caller's write transaction, so two processes that both see a candidate never both
execute it; with ``lock=True`` (PostgreSQL) the rows are also locked ``FOR UPDATE SKIP
LOCKED``, so a second worker skips a run the first is claiming instead of waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from agentctl.store.ownership import holder_gone, naive
from agentctl.store.statements import Statement, one_of

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.runner import SqlRunner

__all__ = ["ParkedRun", "adoptable_parked_runs", "may_adopt"]


@dataclass(frozen=True, slots=True)
class ParkedRun:
    run_id: str
    previous_owner: str | None
    workflow_file: str | None


@lru_cache(maxsize=2)
def _answered(lock: bool) -> Statement:
    """Paused runs with no pending approval and one decided since they parked; ``lock``
    locks their rows skipping those another transaction holds (PostgreSQL: SQLite has no
    row locks, its one writer holds them all)."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import exists, select

        from agentctl.store.journal_tables import approvals
        from agentctl.store.run_tables import runs

        r = runs.alias("r")
        pending = approvals.alias("p")
        decided = approvals.alias("a")
        query = (
            select(r.c.id, r.c.owner_id, r.c.owner_lease_expires_at, r.c.workflow_file)
            .where(
                r.c.status == "paused",
                ~exists().where(pending.c.run_id == r.c.id, pending.c.status == "pending"),
                exists().where(
                    decided.c.run_id == r.c.id,
                    one_of(decided.c.status, ("approved", "rejected", "answered")),
                    decided.c.resolved_at >= r.c.updated_at,
                ),
            )
            .order_by(r.c.updated_at, r.c.id)
        )
        return query.with_for_update(of=r, skip_locked=True) if lock else query

    return Statement(build, f"answered(lock={lock})")


def adoptable_parked_runs(
    conn: SqlRunner, now: datetime, *, limit: int | None = None, lock: bool = False
) -> list[ParkedRun]:
    """Parked runs that the rule above lets this process continue, oldest parked first.

    ``lock`` (inside a write transaction on PostgreSQL) locks the candidate rows and skips
    rows another transaction holds; on SQLite the write transaction already excludes every
    other writer, and ``lock`` changes nothing.
    """
    found: list[ParkedRun] = []
    for row in _answered(lock).run(conn):
        if not holder_gone(row[1], naive(row[2]), now):
            continue
        found.append(ParkedRun(str(row[0]), row[1], row[3]))
        if limit is not None and len(found) >= limit:
            break
    return found


def may_adopt(
    status: str,
    owner_id: str | None,
    lease_expires_at: datetime | None,
    pending_approvals: int,
    now: datetime,
) -> bool:
    """Whether one run may be continued by this process once a person answered: it is
    ``paused``, or ``running`` under a recorded owner (a run nobody claimed yet is about to
    be started by whoever created it), nothing is still pending, and the owner is gone by
    :func:`agentctl.store.ownership.holder_gone` (the same test as the scan above)."""
    if status == "running" and not owner_id:
        return False
    if status not in ("paused", "running") or pending_approvals:
        return False
    return holder_gone(owner_id, naive(lease_expires_at), now)
