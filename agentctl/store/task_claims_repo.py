"""Task claims (PostgreSQL workers): a run's ready tasks that any worker may execute.

A row's life (docs/postgresql.md, "Task-level claims"):

- the run's owner **publishes** each task of a parallel batch as ``ready``, with the vars it
  runs with and a ``basis`` digest of what it was decided from (inside the owner's fenced
  write transaction: an owner that lost its run publishes nothing);
- a worker **claims** it (``SELECT … FOR UPDATE SKIP LOCKED``): ``claimed``, its name, a
  lease, and ``token`` incremented, the fencing token of this claim;
- every write the worker makes for the task checks the token inside its transaction, the
  claim's row read ``FOR SHARE`` until the commit (``claim_fences.check_claim``; in a write that
  appends to the run's audit chain, right after the run's lock, which such a write takes
  late: ``claim_fences.lock_run_and_check_claim``), and the outcome is recorded with the row
  moving to ``done`` in one conditional update (``claim_fences.finish_claim``); a claim whose
  lease ran out is claimed again by another worker with the next token, so the first
  worker's late writes fail instead of landing;
- the owner reads the outcomes, commits the batch in plan order and **removes** the rows.

This module is the workers' side: claiming rows (and reclaiming those whose lease ran
out) and what a worker reads of the run it executes a task of. The owner's side —
publishing a batch, reading its outcomes, withdrawing it — is
:mod:`agentctl.store.claim_batches_repo`, whose names this module exports too, so a caller
of either side imports this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import run_queue
from agentctl.store.claim_batches_repo import (
    CHUNK,
    Published,
    claim_states,
    claims_done,
    publish,
    published_task_ids,
    remove_claims,
)
from agentctl.store.statements import Statement, id_list, id_values, padded, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy import Select
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = [
    "CHUNK",
    "ClaimedTask",
    "Published",
    "claim_ready",
    "claim_ready_rows",
    "claim_states",
    "claimable",
    "claims_done",
    "publish",
    "published_task_ids",
    "remove_claims",
    "run_watch",
    "snapshot_key",
]


@dataclass(frozen=True, slots=True)
class ClaimedTask:
    """One claim a worker took: the fencing token is what its writes are checked against."""

    run_id: str
    task_id: str
    token: int
    payload_json: str
    ready_at: datetime
    started_at: datetime
    previous_worker: str | None
    #: :func:`snapshot_key` of the run when the task was claimed: a worker that holds a
    #: snapshot of the run with this key needs no read to execute the task.
    snapshot_key: tuple[int, int] = (0, 0)


def claimable(conn: Any, now: datetime, only_runs: Iterable[str] | None = None) -> bool:
    """Whether :func:`claim_ready` would find anything (a read: an idle worker woken by
    every notification looks before it takes the write lock)."""
    runs = None if only_runs is None else list(only_runs)
    if runs is not None and not runs:
        return False
    listed = {} if runs is None else id_values(padded(runs), "run")
    found = _claimable(None if runs is None else len(listed)).run(conn, now=to_db(now), **listed)
    return found.first() is not None


def _state(name: str) -> Any:
    """A state a claim looks for, as a literal in the statement's text (never a parameter):
    the partial indexes of ready rows and of leases (``state = 'ready'``, ``state =
    'claimed'``) serve only a statement whose condition names the same constant, and a
    prepared statement's generic plan cannot see a parameter's value."""
    from sqlalchemy import literal_column

    return literal_column(f"'{name}'")


@lru_cache(maxsize=16)
def _claimable(runs: int | None) -> Statement:
    """The claimable-row probe, of every run or of ``runs`` listed ones."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, literal_column, or_, select

        from agentctl.store.run_tables import runs as runs_table
        from agentctl.store.run_tables import task_claims

        c, r = task_claims.alias("c"), runs_table.alias("r")
        query: Select[Any] = (
            select(literal_column("1"))
            .select_from(c.join(r, r.c.id == c.c.run_id))
            .where(
                r.c.status == "running",
                or_(
                    c.c.state == _state("ready"),
                    (c.c.state == _state("claimed")) & (c.c.lease_expires_at < bindparam("now")),
                ),
            )
        )
        if runs is not None:
            query = query.where(id_list(c.c.run_id, runs, "run"))
        return query.limit(1)

    return Statement(build, f"claimable({runs})")


def claim_ready(
    conn: Any,
    worker: str,
    now: datetime,
    limit: int,
    lease_seconds: float,
    *,
    only_runs: Iterable[str] | None = None,
    reclaim: bool = True,
) -> list[ClaimedTask]:
    """Claim up to ``limit`` tasks of running runs, oldest ready first: ``ready`` rows and
    (``reclaim``) ``claimed`` rows whose lease ran out. Rows another worker is claiming
    are skipped.

    Each row is decided under its own row lock (``FOR UPDATE SKIP LOCKED``, then an
    update of the locked row), so without ``reclaim`` this is exact in a transaction
    that does not hold the store's write lock (``Store.row_write``): two workers never
    take one row, and a row claimed, finished or withdrawn meanwhile is re-checked by
    the server before it is locked. A reclaim is recorded with an audit event of the run,
    which needs the run's lock: a scoped write (``Store.write(locks.Locks())``) tries it
    for each expired row, and passes by a row whose run has a write in flight (the next
    round takes it), as it passes by a locked row."""
    stamp = to_db(now)
    runs = None if only_runs is None else list(only_runs)
    if runs is not None and not runs:
        return []
    listed = {} if runs is None else id_values(padded(runs), "run")
    picked = list(
        _claim_candidates(reclaim, None if runs is None else len(listed)).run(
            conn, now=stamp, limit=limit, **listed
        )
    )
    expires = to_db(now + timedelta(seconds=lease_seconds))
    claimed: list[ClaimedTask] = []
    for run_id, task_id, token, payload, ready_at, previous, state, owner_token, seq in picked:
        if state == "claimed" and not run_queue.try_run_lock(conn, str(run_id)):
            continue
        _claim.run(
            conn,
            worker=worker,
            token=int(token) + 1,
            expires=expires,
            stamp=stamp,
            run_id=run_id,
            task_id=task_id,
        )
        claimed.append(
            ClaimedTask(
                str(run_id),
                str(task_id),
                int(token) + 1,
                str(payload),
                _naive(ready_at),
                now,
                None if previous is None else str(previous),
                (int(owner_token or 0), int(seq or 0)),
            )
        )
    return claimed


def claim_ready_rows(
    conn: Any,
    worker: str,
    now: datetime,
    limit: int,
    lease_seconds: float,
    *,
    only_runs: Iterable[str] | None = None,
) -> list[ClaimedTask]:
    """Claim up to ``limit`` ``ready`` rows of running runs, oldest first (no reclaims):
    the claim a worker makes on every wake-up (``Store.autocommit``).

    On PostgreSQL it is one statement: the rows are picked ``FOR UPDATE SKIP LOCKED`` by a
    sub-select (a row another worker is claiming is passed by; one claimed, finished or
    withdrawn meanwhile is re-checked by the server before it is locked) and updated by
    the same statement, which returns them: exact by itself, one round trip where a
    transaction, the pick and an update per row took three and more. On SQLite
    (one writer) it is :func:`claim_ready` in the writer's transaction."""
    from agentctl.store.dialect import sql_dialect

    if not sql_dialect(conn.dialect.name).one_statement_claims:
        return claim_ready(
            conn, worker, now, limit, lease_seconds, only_runs=only_runs, reclaim=False
        )
    runs = None if only_runs is None else list(only_runs)
    if runs is not None and not runs:
        return []
    listed = {} if runs is None else id_values(padded(runs), "run")
    rows = _claim_now(None if runs is None else len(listed)).run(
        conn,
        now=to_db(now),
        limit=limit,
        worker=worker,
        expires=to_db(now + timedelta(seconds=lease_seconds)),
        stamp=to_db(now),
        **listed,
    )
    picked = sorted(
        (_naive(ready_at), str(run_id), str(task_id), int(token), str(payload), owner, seq)
        for run_id, task_id, token, payload, ready_at, owner, seq in rows
    )
    return [
        ClaimedTask(
            run_id, task_id, token, payload, ready_at, now, None, (int(owner or 0), int(seq or 0))
        )
        for ready_at, run_id, task_id, token, payload, owner, seq in picked
    ]


@lru_cache(maxsize=16)
def _claim_now(runs: int | None) -> Statement:
    """The one-statement claim of ``ready`` rows (PostgreSQL), of every run or of ``runs``
    listed ones; returns the claimed rows with the run's snapshot key."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, func, select, update

        from agentctl.store.audit_tables import checkpoints
        from agentctl.store.run_tables import runs as runs_table
        from agentctl.store.run_tables import task_claims

        c, r = task_claims.alias("c"), runs_table.alias("r")
        pick = (
            select(c.c.run_id, c.c.task_id)
            .select_from(c.join(r, r.c.id == c.c.run_id))
            .where(r.c.status == "running", c.c.state == _state("ready"))
        )
        if runs is not None:
            pick = pick.where(id_list(c.c.run_id, runs, "run"))
        picked = (
            pick.order_by(c.c.ready_at, c.c.run_id, c.c.task_id)
            .limit(bindparam("limit"))
            .with_for_update(of=c, skip_locked=True)
            .subquery("picked")
        )
        t = task_claims
        owner_token = (
            select(runs_table.c.owner_token).where(runs_table.c.id == t.c.run_id).scalar_subquery()
        )
        last_seq = (
            select(func.max(checkpoints.c.seq))
            .where(checkpoints.c.run_id == t.c.run_id)
            .scalar_subquery()
        )
        return (
            update(t)
            .where(t.c.run_id == picked.c.run_id, t.c.task_id == picked.c.task_id)
            .values(
                state="claimed",
                worker=bindparam("worker"),
                token=t.c.token + 1,
                lease_expires_at=bindparam("expires"),
                started_at=bindparam("stamp"),
            )
            .returning(
                t.c.run_id,
                t.c.task_id,
                t.c.token,
                t.c.payload_json,
                t.c.ready_at,
                owner_token,
                last_seq,
            )
        )

    return Statement(build, f"claim_now({runs})")


@lru_cache(maxsize=32)
def _claim_candidates(reclaim: bool, runs: int | None) -> Statement:
    """The rows a claim takes, locked (``FOR UPDATE OF c SKIP LOCKED``), oldest first."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, func, or_, select

        from agentctl.store.audit_tables import checkpoints
        from agentctl.store.run_tables import runs as runs_table
        from agentctl.store.run_tables import task_claims

        c, r, k = task_claims.alias("c"), runs_table.alias("r"), checkpoints.alias("k")
        last_seq = select(func.max(k.c.seq)).where(k.c.run_id == c.c.run_id).scalar_subquery()
        takeable = c.c.state == _state("ready")
        if reclaim:
            takeable = or_(
                takeable,
                (c.c.state == _state("claimed")) & (c.c.lease_expires_at < bindparam("now")),
            )
        query = (
            select(
                c.c.run_id,
                c.c.task_id,
                c.c.token,
                c.c.payload_json,
                c.c.ready_at,
                c.c.worker,
                c.c.state,
                r.c.owner_token,
                last_seq,
            )
            .select_from(c.join(r, r.c.id == c.c.run_id))
            .where(r.c.status == "running", takeable)
        )
        if runs is not None:
            query = query.where(id_list(c.c.run_id, runs, "run"))
        return (
            query.order_by(c.c.ready_at, c.c.run_id, c.c.task_id)
            .limit(bindparam("limit"))
            .with_for_update(of=c, skip_locked=True)
        )

    return Statement(build, f"claim_candidates({reclaim}, {runs})")


@statement
def _claim(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    return (
        update(task_claims)
        .where(c.run_id == bindparam("run_id"), c.task_id == bindparam("task_id"))
        .values(
            state="claimed",
            worker=bindparam("worker"),
            token=bindparam("token"),
            lease_expires_at=bindparam("expires"),
            started_at=bindparam("stamp"),
        )
    )


def _naive(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=None) if isinstance(value, datetime) else datetime.min


def snapshot_key(conn: Any, run_id: str) -> tuple[int, int]:
    """``(owner token, last checkpoint)`` of a run: what its committed task rows and
    working memory can change only with (a new owner, or a commit that checkpoints)."""
    row = _snapshot_key.run(conn, run_id=run_id).first()
    return (0, 0) if row is None else (int(row[0] or 0), int(row[1] or 0))


@statement
def _snapshot_key(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    from agentctl.store.audit_tables import checkpoints
    from agentctl.store.run_tables import runs

    last_seq = (
        select(func.max(checkpoints.c.seq))
        .where(checkpoints.c.run_id == runs.c.id)
        .scalar_subquery()
    )
    return select(runs.c.owner_token, last_seq).where(runs.c.id == bindparam("run_id"))


def run_watch(conn: Any, run_id: str) -> tuple[str | None, bool]:
    """``(status, cancel requested)`` of a run whose task a worker executes."""
    row = _run_watch.run(conn, run_id=run_id).first()
    return (None, False) if row is None else (str(row[0]), bool(row[1]))


@statement
def _run_watch(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs

    return select(runs.c.status, runs.c.cancel_requested).where(runs.c.id == bindparam("run_id"))
