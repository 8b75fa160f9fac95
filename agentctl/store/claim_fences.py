"""The fences of a task claim (PostgreSQL workers): what every write a worker makes for a
claimed task checks, so a worker whose claim was taken over or withdrawn writes nothing.

A claim's row carries a fencing token, incremented at each claim (docs/postgresql.md,
"Task-level claims"; claiming and publishing are in ``task_claims_repo``). Each write of the
claimed task checks it inside its own transaction: read ``FOR SHARE`` until the commit
(:func:`check_claim`), taken with the run's late lock in one statement
(:func:`lock_run_and_check_claim`), sent with the transaction's ``COMMIT``, which it
refuses when it fails (:func:`commit_if_claim_holds`), or carried in the ``WHERE`` of the
write itself (:func:`claim_holds`, :class:`FencedRows`). The leases' renewal (one
statement for every claim a worker holds, :func:`renew_held_claims`) and the outcome's
record (:func:`finish_claim`) are conditional updates on the token.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.errors import OwnershipLostError
from agentctl.store import locks, run_queue
from agentctl.store.sealing import sealer_of
from agentctl.store.statements import Statement, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect
    from agentctl.store.driver_sessions import DriverSession

__all__ = [
    "FencedRows",
    "check_claim",
    "claim_holds",
    "commit_if_claim_holds",
    "finish_claim",
    "lock_run_and_check_claim",
]


def _lost(run_id: str, task_id: str, token: int, found: Any) -> OwnershipLostError:
    holder = "nobody (the run's owner withdrew it)" if found is None else str(found[2] or "?")
    return OwnershipLostError(
        f"this worker no longer holds task {task_id} of run {run_id}: it is now held by "
        f"{holder} (fencing token {token} is stale); nothing was written",
        run_id=run_id,
        hint=f"inspect what was recorded with `agentctl inspect {run_id}`",
    )


def check_claim(
    conn: Any, run_id: str, task_id: str, token: int, *, lock_row: bool = False
) -> None:
    """Fail unless this claim still holds the task (inside a write transaction).

    ``lock_row`` (PostgreSQL, in a transaction without the write lock): the claim's row is
    read ``FOR SHARE`` and stays locked until the transaction ends, so the claim cannot be
    taken (a reclaim skips locked rows) or withdrawn (a delete waits) before it commits."""
    found = _claim_row(lock_row).run(conn, run_id=run_id, task_id=task_id).first()
    if found is None or int(found[0]) != token or found[1] != "claimed":
        raise _lost(run_id, task_id, token, found)


#: The claim's fence as a statement that fails when the fence does (``division_by_zero``,
#: SQLSTATE 22012, when no row of the claim is ``claimed`` with the token), its row read
#: ``FOR SHARE``: sent before a ``COMMIT`` in one pipeline, it makes the server skip the
#: commit (store/pg_statements.py). PostgreSQL only; the parameters are the run's id, the
#: task's and the token.
_FENCE_OR_FAIL = (
    "SELECT 1 / (SELECT count(*) FROM (SELECT 1 FROM task_claims WHERE task_claims.run_id = %s"
    " AND task_claims.task_id = %s AND task_claims.token = %s"
    " AND task_claims.state = 'claimed' FOR SHARE) AS held) AS holds"
)
_FENCE_FAILED = "22012"


def commit_if_claim_holds(session: DriverSession, run_id: str, task_id: str, token: int) -> None:
    """Commit ``session``'s transaction (PostgreSQL) unless this claim no longer holds the
    task: the fence (the claim's row read ``FOR SHARE``) and the ``COMMIT`` in one round
    trip, the fence's row locked from the statement to the commit as by :func:`check_claim`
    before the commit. When the fence fails the server skips the commit, the transaction is
    rolled back and :class:`OwnershipLostError` raised: nothing of it landed."""
    try:
        session.commit_after(_FENCE_OR_FAIL, (run_id, task_id, token))
    except Exception as failed:
        if getattr(failed, "sqlstate", None) != _FENCE_FAILED:
            raise
        check_claim(session, run_id, task_id, token)  # who holds it now, for the error
        raise _lost(run_id, task_id, token, None) from None  # pragma: no cover


def claim_holds() -> Any:
    """``EXISTS`` the claim's row with its token, still ``claimed``, read ``FOR SHARE``
    (parameters ``fence_run_id``, ``fence_task_id``, ``fence_token``): the fence a guarded
    transition of a claimed task carries in its own ``WHERE`` (:class:`FencedRows`), so the
    check and the write are one statement. Under ``READ COMMITTED`` the row lock follows a
    claim row updated meanwhile (a reclaim's new token fails the check) and drops one
    deleted (a withdrawal); until the statement commits, a reclaim (``SKIP LOCKED``) passes
    the row by and a withdrawal waits. SQLite (one writer) reads it plainly."""
    from sqlalchemy import bindparam, exists, literal, select

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    return exists(
        select(literal(1))
        .where(
            c.run_id == bindparam("fence_run_id"),
            c.task_id == bindparam("fence_task_id"),
            c.token == bindparam("fence_token"),
            c.state == "claimed",
        )
        .with_for_update(read=True)
    )


class FencedRows:
    """Statements of a claimed task that each commit by themselves and are exact by row
    locks (the move of an effect to ``started``), fenced by the claim: the only writes it
    runs are guarded transitions (``transitions.guarded_update``), which carry the fence in
    their ``WHERE`` (:func:`claim_holds`) and, when it refuses, ask :meth:`refused` why. Any
    other write through it raises ``RuntimeError``, so none can skip the fence."""

    __slots__ = ("_claim", "_conn", "claim_fence", "dialect", "sealer")

    def __init__(self, conn: Any, run_id: str, task_id: str, token: int) -> None:
        self._conn = conn
        self._claim = (run_id, task_id, token)
        self.dialect = conn.dialect
        self.sealer = sealer_of(conn)  # a driver session's, or a SQLAlchemy connection's option
        #: The fence's parameters, which a guarded transition adds to its own.
        self.claim_fence: dict[str, Any] = {
            "fence_run_id": run_id,
            "fence_task_id": task_id,
            "fence_token": token,
        }

    def exec_fenced(self, statement: str, parameters: Any) -> Any:
        """A statement whose ``WHERE`` holds :func:`claim_holds` (a guarded transition)."""
        return self._conn.exec_driver_sql(statement, parameters)

    def exec_driver_sql(self, statement: str, parameters: Any = ()) -> Any:
        if not statement.lstrip()[:6].upper() == "SELECT":
            raise RuntimeError(
                "a claimed task's row write runs guarded transitions only (fenced by the "
                f"claim in their WHERE), not {statement[:60]!r}"
            )
        return self._conn.exec_driver_sql(statement, parameters)

    def refused(self) -> None:
        """After a fenced transition changed nothing: :class:`OwnershipLostError` when the
        claim was lost; otherwise it returns (the record's state refused it)."""
        check_claim(self._conn, *self._claim)


def lock_run_and_check_claim(conn: Any, run_id: str, task_id: str, token: int) -> None:
    """Take the run's lock (waiting for it), then fail unless this claim still holds the
    task, its row read ``FOR SHARE`` until the commit: one statement, for a claimed task's
    write that took its run's lock late (``locks.hold_run``). The run's lock comes before
    the claim's row, as in the owner's writes (which hold the run's lock from their
    ``BEGIN`` and may withdraw claim rows), so the two never wait for each other in a
    circle. On SQLite (no advisory locks: one writer) it is :func:`check_claim`."""
    from agentctl.store.dialect import sql_dialect

    if not sql_dialect(conn.dialect.name).advisory_locks:
        check_claim(conn, run_id, task_id, token)
        return
    (name,) = locks.run(run_id).exclusive
    found = _lock_and_claim_row.run(
        conn, key=locks.key(name), run_id=run_id, task_id=task_id
    ).first()
    if found is None or int(found[0]) != token or found[1] != "claimed":
        raise _lost(run_id, task_id, token, found)


@statement
def _lock_and_claim_row(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select, true

    from agentctl.store.run_tables import task_claims

    # The lock is a one-row sub-select joined to the claim's row; the row lock (FOR SHARE
    # OF the claim) is taken above the join, after the advisory lock was granted, and
    # reads the row's latest committed version whatever the statement's snapshot (READ
    # COMMITTED follows a row updated meanwhile, and drops one deleted).
    c = task_claims.alias("c")
    lock = select(func.pg_advisory_xact_lock(bindparam("key")).label("held")).subquery("l")
    return (
        select(c.c.token, c.c.state, c.c.worker)
        .select_from(c.join(lock, true()))
        .where(c.c.run_id == bindparam("run_id"), c.c.task_id == bindparam("task_id"))
        .with_for_update(read=True, of=c)
    )


@lru_cache(maxsize=2)
def _claim_row(lock_row: bool) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        query = select(c.token, c.state, c.worker).where(
            c.run_id == bindparam("run_id"), c.task_id == bindparam("task_id")
        )
        return query.with_for_update(read=True) if lock_row else query

    return Statement(build, f"claim_row(lock_row={lock_row})")


def finish_claim(
    conn: Any, run_id: str, task_id: str, token: int, outcome_json: str, now: datetime
) -> None:
    """Record the task's outcome, fenced by the claim's token; a stale claim writes nothing
    and gets :class:`OwnershipLostError`. One conditional update of the claim's row, which
    also wakes the run's owner (``done:RUN`` on the done channel, which only workers
    driving runs listen to): exact by itself, so it
    needs neither the store's write lock nor a transaction around it
    (``Store.autocommit``)."""
    updated = _finish.run(
        conn,
        outcome_json=outcome_json,
        stamp=to_db(now),
        run_id=run_id,
        task_id=task_id,
        token=token,
    )
    if updated.rowcount != 1:
        check_claim(conn, run_id, task_id, token)
        raise _lost(run_id, task_id, token, None)  # pragma: no cover - check_claim raised


@statement
def _finish(sql: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, literal, null, update

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    finish = (
        update(task_claims)
        .where(
            c.run_id == bindparam("run_id"),
            c.task_id == bindparam("task_id"),
            c.token == bindparam("token"),
            c.state == "claimed",
        )
        .values(
            state="done",
            outcome_json=bindparam("outcome_json"),
            finished_at=bindparam("stamp"),
            lease_expires_at=null(),
        )
    )
    return sql.notifying(finish, run_queue.DONE_CHANNEL, literal("done:") + c.run_id)


#: A claim as its holder names it in :func:`renew_held_claims`: ``(run, task, token)``.
HeldClaim = tuple[str, str, int]


def renew_held_claims(
    conn: Any, held: list[HeldClaim], now: datetime, lease_seconds: float
) -> dict[HeldClaim, bool]:
    """Extend the leases of every claim one worker holds, in one conditional update (the
    worker's one heartbeat, where each claim renewed its own and read its run: two
    statements per claim per period). A claim is renewed while it still holds its task
    (its token, ``claimed``) and its run is ``running``; returned for each renewed claim is
    whether its run has a cancel request. A claim missing from the result was lost or its
    run stopped (:func:`check_claim` and the run's status tell which). On PostgreSQL one
    statement whatever the number of claims (their keys as three arrays that ``unnest``
    pairs up); elsewhere (SQLite never has workers) the same update per claim."""
    from agentctl.store.dialect import sql_dialect

    expires = to_db(now + timedelta(seconds=lease_seconds))
    if not held:
        return {}
    if sql_dialect(conn.dialect.name).one_statement_claims:
        found = _renew_all_held.run(
            conn,
            expires=expires,
            run_ids=[run_id for run_id, _, _ in held],
            task_ids=[task_id for _, task_id, _ in held],
            tokens=[token for _, _, token in held],
        )
        return {(str(r[0]), str(r[1]), int(r[2])): bool(r[3]) for r in found}
    renewed: dict[HeldClaim, bool] = {}
    for run_id, task_id, token in held:
        for row in _renew_held.run(
            conn, expires=expires, run_id=run_id, task_id=task_id, token=token
        ):
            renewed[(str(row[0]), str(row[1]), int(row[2]))] = bool(row[3])
    return renewed


def _renew_held_update(keys: Any) -> Executable:
    """The renewal of the claims ``keys`` names (columns of a table of ``run_id``,
    ``task_id``, ``token``, or one claim's parameters). Their runs are read in correlated
    sub-queries, not joined: SQLite's ``RETURNING`` names the updated table only."""
    from sqlalchemy import bindparam, exists, literal, select, update

    from agentctl.store.run_tables import runs, task_claims

    c = task_claims.c
    running = exists(select(literal(1)).where(runs.c.id == c.run_id, runs.c.status == "running"))
    cancel = select(runs.c.cancel_requested).where(runs.c.id == c.run_id).scalar_subquery()
    return (
        update(task_claims)
        .where(
            c.run_id == keys[0],
            c.task_id == keys[1],
            c.token == keys[2],
            c.state == "claimed",
            running,
        )
        .values(lease_expires_at=bindparam("expires"))
        .returning(c.run_id, c.task_id, c.token, cancel)
    )


@statement
def _renew_all_held(sql: SqlDialect) -> Executable:
    if not sql.one_statement_claims:
        return _one_held()
    from sqlalchemy import Integer, Text, bindparam, cast, func
    from sqlalchemy.dialects.postgresql import ARRAY

    held = (
        func.unnest(
            cast(bindparam("run_ids"), ARRAY(Text)),
            cast(bindparam("task_ids"), ARRAY(Text)),
            cast(bindparam("tokens"), ARRAY(Integer)),
        )
        .table_valued("run_id", "task_id", "token")
        .render_derived(name="held")
    )
    return _renew_held_update((held.c.run_id, held.c.task_id, held.c.token))


@statement
def _renew_held(_: SqlDialect) -> Executable:
    return _one_held()


def _one_held() -> Executable:
    from sqlalchemy import bindparam

    return _renew_held_update((bindparam("run_id"), bindparam("task_id"), bindparam("token")))
