"""Task claims (PostgreSQL workers): a run's ready tasks that any worker may execute.

A row's life (docs/postgresql.md, "Task-level claims"):

- the run's owner **publishes** each task of a parallel batch as ``ready``, with the vars it
  runs with and a ``basis`` digest of what it was decided from (inside the owner's fenced
  write transaction: an owner that lost its run publishes nothing);
- a worker **claims** it (``SELECT … FOR UPDATE SKIP LOCKED``): ``claimed``, its name, a
  lease, and ``token`` incremented, the fencing token of this claim;
- every write the worker makes for the task checks the token first (:func:`check_claim`),
  under the store's write lock, and the outcome is recorded with the row moving to
  ``done`` in one transaction (:func:`finish_claim`); a claim whose lease ran out is
  claimed again by another worker with the next token, so the first worker's late writes
  fail instead of landing;
- the owner reads the outcomes, commits the batch in plan order and **removes** the rows.

Publishing again with the same basis keeps the row as it is (an owner that took the run
over finds the outcomes a live worker produced); a different basis replaces it and bumps
the token, fencing out whoever held the old claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agentctl.errors import OwnershipLostError
from agentctl.store import locks
from agentctl.store.run_queue import notify_run
from agentctl.store.timestamps import to_db

__all__ = [
    "ClaimedTask",
    "Published",
    "check_claim",
    "claim_ready",
    "claim_states",
    "claimable",
    "claims_done",
    "finish_claim",
    "publish",
    "published_task_ids",
    "remove_claims",
    "renew_claim",
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


def publish(conn: Any, run_id: str, items: Sequence[Published], now: datetime) -> None:
    """Make ``items`` claimable (see the module docstring for an existing row)."""
    existing = {
        str(row[0]): (str(row[1]), int(row[2]))
        for row in conn.exec_driver_sql(
            "SELECT task_id, basis, token FROM task_claims WHERE run_id = ?", (run_id,)
        )
    }
    stamp = to_db(now)
    for item in items:
        found = existing.get(item.task_id)
        if found is not None and found[0] == item.basis:
            continue
        if found is not None:
            conn.exec_driver_sql(
                "UPDATE task_claims SET state = 'ready', basis = ?, payload_json = ?, "
                "token = token + 1, worker = NULL, lease_expires_at = NULL, ready_at = ?, "
                "started_at = NULL, finished_at = NULL, outcome_json = NULL "
                "WHERE run_id = ? AND task_id = ?",
                (item.basis, item.payload_json, stamp, run_id, item.task_id),
            )
        else:
            conn.exec_driver_sql(
                "INSERT INTO task_claims (run_id, task_id, state, basis, payload_json, token, "
                "ready_at) VALUES (?, ?, 'ready', ?, ?, 0, ?)",
                (run_id, item.task_id, item.basis, item.payload_json, stamp),
            )
    notify_run(conn, f"tasks:{run_id}")


def claimable(conn: Any, now: datetime, only_runs: Iterable[str] | None = None) -> bool:
    """Whether :func:`claim_ready` would find anything (a read: an idle worker woken by
    every notification looks before it takes the write lock)."""
    statement = (
        "SELECT 1 FROM task_claims c JOIN runs r ON r.id = c.run_id WHERE r.status = 'running' "
        "AND (c.state = 'ready' OR (c.state = 'claimed' AND c.lease_expires_at < ?))"
    )
    parameters: list[Any] = [to_db(now)]
    if only_runs is not None:
        runs = list(only_runs)
        if not runs:
            return False
        statement += f" AND c.run_id IN ({', '.join('?' for _ in runs)})"
        parameters.extend(runs)
    return conn.exec_driver_sql(statement + " LIMIT 1", tuple(parameters)).first() is not None


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
    expired = " OR (c.state = 'claimed' AND c.lease_expires_at < ?)" if reclaim else ""
    statement = (
        "SELECT c.run_id, c.task_id, c.token, c.payload_json, c.ready_at, c.worker, c.state, "
        "r.owner_token, (SELECT MAX(k.seq) FROM checkpoints k WHERE k.run_id = c.run_id) "
        "FROM task_claims c JOIN runs r ON r.id = c.run_id WHERE r.status = 'running' "
        f"AND (c.state = 'ready'{expired})"
    )
    parameters: list[Any] = [stamp] if reclaim else []
    if only_runs is not None:
        runs = list(only_runs)
        if not runs:
            return []
        statement += f" AND c.run_id IN ({', '.join('?' for _ in runs)})"
        parameters.extend(runs)
    statement += " ORDER BY c.ready_at, c.run_id, c.task_id LIMIT ? FOR UPDATE OF c SKIP LOCKED"
    parameters.append(limit)
    picked = list(conn.exec_driver_sql(statement, tuple(parameters)))
    expires = to_db(now + timedelta(seconds=lease_seconds))
    claimed: list[ClaimedTask] = []
    for run_id, task_id, token, payload, ready_at, previous, state, owner_token, seq in picked:
        if state == "claimed" and not locks.try_run_lock(conn, str(run_id)):
            continue
        conn.exec_driver_sql(
            "UPDATE task_claims SET state = 'claimed', worker = ?, token = ?, "
            "lease_expires_at = ?, started_at = ? WHERE run_id = ? AND task_id = ?",
            (worker, int(token) + 1, expires, stamp, run_id, task_id),
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


def _naive(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=None) if isinstance(value, datetime) else datetime.min


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
    found = conn.exec_driver_sql(
        "SELECT token, state, worker FROM task_claims WHERE run_id = ? AND task_id = ?"
        + (" FOR SHARE" if lock_row else ""),
        (run_id, task_id),
    ).first()
    if found is None or int(found[0]) != token or found[1] != "claimed":
        raise _lost(run_id, task_id, token, found)


def renew_claim(
    conn: Any, run_id: str, task_id: str, token: int, now: datetime, lease_seconds: float
) -> None:
    """Extend the claim's lease (the worker's heartbeat); fails when the claim was lost."""
    updated = conn.exec_driver_sql(
        "UPDATE task_claims SET lease_expires_at = ? WHERE run_id = ? AND task_id = ? "
        "AND token = ? AND state = 'claimed'",
        (to_db(now + timedelta(seconds=lease_seconds)), run_id, task_id, token),
    )
    if updated.rowcount != 1:
        check_claim(conn, run_id, task_id, token)


def finish_claim(
    conn: Any, run_id: str, task_id: str, token: int, outcome_json: str, now: datetime
) -> None:
    """Record the task's outcome, fenced by the claim's token; a stale claim writes nothing
    and gets :class:`OwnershipLostError`. One conditional update of the claim's row: exact
    without the store's write lock (``Store.row_write``)."""
    updated = conn.exec_driver_sql(
        "UPDATE task_claims SET state = 'done', outcome_json = ?, finished_at = ?, "
        "lease_expires_at = NULL WHERE run_id = ? AND task_id = ? AND token = ? "
        "AND state = 'claimed'",
        (outcome_json, to_db(now), run_id, task_id, token),
    )
    if updated.rowcount != 1:
        check_claim(conn, run_id, task_id, token)
        raise _lost(run_id, task_id, token, None)  # pragma: no cover - check_claim raised
    notify_run(conn, f"done:{run_id}")  # wakes the run's owner, not idle workers


def claim_states(
    conn: Any, run_id: str, task_ids: Sequence[str]
) -> dict[str, tuple[str, str | None]]:
    """``task id -> (state, outcome JSON)`` for the rows of ``task_ids`` that exist."""
    if not task_ids:
        return {}
    marks = ", ".join("?" for _ in task_ids)
    rows = conn.exec_driver_sql(
        f"SELECT task_id, state, outcome_json FROM task_claims WHERE run_id = ? "  # noqa: S608
        f"AND task_id IN ({marks})",
        (run_id, *task_ids),
    )
    return {str(row[0]): (str(row[1]), row[2]) for row in rows}


def claims_done(conn: Any, run_id: str, task_ids: Sequence[str]) -> tuple[int, int]:
    """``(rows of task_ids that exist, of them done)``: what an owner waiting for its batch
    reads on each wake-up (one row, where :func:`claim_states` returns every outcome)."""
    if not task_ids:
        return 0, 0
    marks = ", ".join("?" for _ in task_ids)
    row = conn.exec_driver_sql(
        f"SELECT COUNT(*), COUNT(CASE WHEN state = 'done' THEN 1 END) FROM task_claims "  # noqa: S608
        f"WHERE run_id = ? AND task_id IN ({marks})",
        (run_id, *task_ids),
    ).first()
    return int(row[0] or 0), int(row[1] or 0)


def remove_claims(conn: Any, run_id: str, task_ids: Sequence[str] | None = None) -> None:
    """Withdraw rows (all of the run's when ``task_ids`` is None): their holders' next
    fenced write fails."""
    if task_ids is None:
        conn.exec_driver_sql("DELETE FROM task_claims WHERE run_id = ?", (run_id,))
        return
    for start in range(0, len(task_ids), 500):
        chunk = list(task_ids[start : start + 500])
        marks = ", ".join("?" for _ in chunk)
        conn.exec_driver_sql(
            f"DELETE FROM task_claims WHERE run_id = ? AND task_id IN ({marks})",  # noqa: S608
            (run_id, *chunk),
        )


def published_task_ids(conn: Any, run_id: str) -> list[str]:
    """The tasks of ``run_id`` published for workers now (the owner's current batch)."""
    rows = conn.exec_driver_sql("SELECT task_id FROM task_claims WHERE run_id = ?", (run_id,))
    return [str(row[0]) for row in rows]


def snapshot_key(conn: Any, run_id: str) -> tuple[int, int]:
    """``(owner token, last checkpoint)`` of a run: what its committed task rows and
    working memory can change only with (a new owner, or a commit that checkpoints)."""
    row = conn.exec_driver_sql(
        "SELECT r.owner_token, (SELECT MAX(seq) FROM checkpoints c WHERE c.run_id = r.id) "
        "FROM runs r WHERE r.id = ?",
        (run_id,),
    ).first()
    return (0, 0) if row is None else (int(row[0] or 0), int(row[1] or 0))


def run_watch(conn: Any, run_id: str) -> tuple[str | None, bool]:
    """``(status, cancel requested)`` of a run whose task a worker executes."""
    row = conn.exec_driver_sql(
        "SELECT status, cancel_requested FROM runs WHERE id = ?", (run_id,)
    ).first()
    return (None, False) if row is None else (str(row[0]), bool(row[1]))
