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

Publishing again with the same basis keeps the row as it is (an owner that took the run
over finds the outcomes a live worker produced); a different basis replaces it and bumps
the token, fencing out whoever held the old claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import run_queue
from agentctl.store.dialect import sql_dialect
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
class Published:
    task_id: str
    basis: str
    payload_json: str


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


#: Ids per ``IN (...)`` list: a power of two (statements.padded), well below both
#: dialects' limits on bound parameters. A batch of at most this many tasks is counted by
#: :func:`claims_done` in one statement.
CHUNK = 512
_CHUNK = CHUNK


def publish(conn: Any, run_id: str, items: Sequence[Published], now: datetime) -> None:
    """Make ``items`` claimable (see the module docstring for an existing row)."""
    existing = {
        str(row[0]): (str(row[1]), int(row[2])) for row in _published.run(conn, run_id=run_id)
    }
    stamp = to_db(now)
    new: list[Published] = []
    for item in items:
        found = existing.get(item.task_id)
        if found is not None and found[0] == item.basis:
            continue
        if found is None:
            new.append(item)
            continue
        _republish.run(conn, **_row_values(run_id, item, stamp))
    if new and sql_dialect(conn.dialect.name).one_statement_claims:
        _publish_all.run(
            conn,
            run_id=run_id,
            task_ids=[item.task_id for item in new],
            bases=[item.basis for item in new],
            payloads=[item.payload_json for item in new],
            stamp=stamp,
        )
    else:
        for item in new:
            _publish.run(conn, **_row_values(run_id, item, stamp))
    run_queue.notify_run(conn, f"tasks:{run_id}")


def _row_values(run_id: str, item: Published, stamp: str) -> dict[str, Any]:
    """A published row's parameters, for its INSERT or its replacing UPDATE."""
    return {
        "run_id": run_id,
        "task_id": item.task_id,
        "basis": item.basis,
        "payload_json": item.payload_json,
        "stamp": stamp,
    }


@statement
def _published(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    return select(c.task_id, c.basis, c.token).where(c.run_id == bindparam("run_id"))


@statement
def _republish(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, null, update

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    return (
        update(task_claims)
        .where(c.run_id == bindparam("run_id"), c.task_id == bindparam("task_id"))
        .values(
            state="ready",
            basis=bindparam("basis"),
            payload_json=bindparam("payload_json"),
            token=c.token + 1,
            worker=null(),
            lease_expires_at=null(),
            ready_at=bindparam("stamp"),
            started_at=null(),
            finished_at=null(),
            outcome_json=null(),
        )
    )


@statement
def _publish_all(sql: SqlDialect) -> Executable:
    """PostgreSQL: every new row of a batch in one statement, the ids, bases and payloads
    given as three arrays that ``unnest`` pairs up (one execution and one round trip, where
    an ``INSERT`` per task took as many: 400 for a 400-task fan-out). Its text does not
    depend on the batch's size. SQLite, which never publishes, gets one row's insert."""
    if not sql.one_statement_claims:
        return _one_row()
    from sqlalchemy import Text, bindparam, cast, func, insert, literal_column, select
    from sqlalchemy.dialects.postgresql import ARRAY

    from agentctl.store.run_tables import task_claims

    c = task_claims.c
    item = (
        func.unnest(
            cast(bindparam("task_ids"), ARRAY(Text)),
            cast(bindparam("bases"), ARRAY(Text)),
            cast(bindparam("payloads"), ARRAY(Text)),
        )
        .table_valued("task_id", "basis", "payload_json")
        .render_derived(name="item")
    )
    rows = select(
        cast(bindparam("run_id"), c.run_id.type),
        item.c.task_id,
        literal_column("'ready'"),
        item.c.basis,
        item.c.payload_json,
        literal_column("0"),
        cast(bindparam("stamp"), c.ready_at.type),
    ).select_from(item)
    columns = ["run_id", "task_id", "state", "basis", "payload_json", "token", "ready_at"]
    return insert(task_claims).from_select(columns, rows)


@statement
def _publish(_: SqlDialect) -> Executable:
    return _one_row()


def _one_row() -> Executable:
    from sqlalchemy import bindparam, insert, literal

    from agentctl.store.run_tables import task_claims

    return insert(task_claims).values(
        run_id=bindparam("run_id"),
        task_id=bindparam("task_id"),
        state="ready",
        basis=bindparam("basis"),
        payload_json=bindparam("payload_json"),
        token=literal(0),
        ready_at=bindparam("stamp"),
    )


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


def claim_states(
    conn: Any, run_id: str, task_ids: Sequence[str]
) -> dict[str, tuple[str, str | None]]:
    """``task id -> (state, outcome JSON)`` for the rows of ``task_ids`` that exist."""
    found: dict[str, tuple[str, str | None]] = {}
    for start in range(0, len(task_ids), _CHUNK):
        listed = id_values(padded(task_ids[start : start + _CHUNK]), "task")
        rows = _claim_states(len(listed)).run(conn, run_id=run_id, **listed)
        found.update((str(row[0]), (str(row[1]), row[2])) for row in rows)
    return found


@lru_cache(maxsize=16)
def _claim_states(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, select

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        return select(c.task_id, c.state, c.outcome_json).where(
            c.run_id == bindparam("run_id"), id_list(c.task_id, count, "task")
        )

    return Statement(build, f"claim_states({count})")


def claims_done(conn: Any, run_id: str, task_ids: Sequence[str]) -> tuple[int, int]:
    """``(rows of task_ids that exist, of them done)``: what an owner waiting for its batch
    reads on each wake-up (one row per chunk, where :func:`claim_states` returns every
    outcome)."""
    rows = done = 0
    for start in range(0, len(task_ids), _CHUNK):
        chunk = task_ids[start : start + _CHUNK]
        # Padding repeats the last id, which IN counts once: the counts stay exact.
        listed = id_values(padded(chunk), "task")
        row = _claims_done(len(listed)).run(conn, run_id=run_id, **listed).first()
        rows, done = rows + int(row[0] or 0), done + int(row[1] or 0)
    return rows, done


@lru_cache(maxsize=16)
def _claims_done(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, case, func, literal_column, select

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        return select(
            func.count(), func.count(case((c.state == "done", literal_column("1"))))
        ).where(c.run_id == bindparam("run_id"), id_list(c.task_id, count, "task"))

    return Statement(build, f"claims_done({count})")


def remove_claims(conn: Any, run_id: str, task_ids: Sequence[str] | None = None) -> None:
    """Withdraw rows (all of the run's when ``task_ids`` is None): their holders' next
    fenced write fails."""
    if task_ids is None:
        _remove_all.run(conn, run_id=run_id)
        return
    for start in range(0, len(task_ids), _CHUNK):
        listed = id_values(padded(task_ids[start : start + _CHUNK]), "task")
        _remove(len(listed)).run(conn, run_id=run_id, **listed)


@statement
def _remove_all(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, delete

    from agentctl.store.run_tables import task_claims

    return delete(task_claims).where(task_claims.c.run_id == bindparam("run_id"))


@lru_cache(maxsize=16)
def _remove(count: int) -> Statement:
    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, delete

        from agentctl.store.run_tables import task_claims

        c = task_claims.c
        return delete(task_claims).where(
            c.run_id == bindparam("run_id"), id_list(c.task_id, count, "task")
        )

    return Statement(build, f"remove_claims({count})")


def published_task_ids(conn: Any, run_id: str) -> list[str]:
    """The tasks of ``run_id`` published for workers now (the owner's current batch)."""
    return [str(row[0]) for row in _published.run(conn, run_id=run_id)]


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
