"""Runs waiting for a worker (PostgreSQL): claiming them, and waking whoever waits.

A run waits for a worker when it is ``running``, unowned, with a lease that has expired:
``roll --detach`` released it to workers (a lease that expired at the epoch), or a worker
gave it back after a transient store error. A run whose owner died or is cut off (owner
recorded, lease expired) waits for an operator, or for a worker started with
``--recover-interrupted``. A run that ``roll`` or ``retry`` has just
created and is about to execute in its own process has no lease at all, so no worker
takes it from under that process.
Workers claim such runs with ``SELECT … FOR UPDATE SKIP LOCKED`` inside their write
transaction, then take ownership through :func:`agentctl.store.ownership.claim`, which
bumps the fencing token: a previous owner that wakes up can no longer write.

Every change of a run's status, and every new detached run, sends ``NOTIFY agentctl_runs``
with the run id, inside the transaction that made it (PostgreSQL delivers it on commit),
so idle workers and ``runs wait`` wake at once instead of polling fast.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

from agentctl.store.dialect import is_postgres
from agentctl.store.timestamps import to_db

__all__ = [
    "CHANNEL",
    "RunsListener",
    "any_claimable_run",
    "claimable_runs",
    "give_back",
    "notify_run",
    "release_to_workers",
    "run_status",
]

CHANNEL = "agentctl_runs"
_EPOCH = "1970-01-01 00:00:00.000000"


def notify_run(conn: Any, run_id: str) -> None:
    """Wake listeners when this transaction commits (nothing to do on SQLite)."""
    if is_postgres(conn):
        conn.exec_driver_sql("SELECT pg_notify(?, ?)", (CHANNEL, run_id))


def release_to_workers(conn: Any, run_id: str) -> bool:
    """Hand an unowned running run to the workers (False when someone owns it already)."""
    updated = conn.exec_driver_sql(
        "UPDATE runs SET owner_lease_expires_at = ? "
        "WHERE id = ? AND status = 'running' AND owner_id IS NULL",
        (_EPOCH, run_id),
    )
    if updated.rowcount != 1:
        return False
    notify_run(conn, run_id)
    return True


def give_back(conn: Any, run_id: str, owner_id: str, *, to_workers: bool) -> bool:
    """Give up a running run that ``owner_id`` was driving and could not go on with:
    unowned, so ``agentctl resume`` takes it, and with ``to_workers`` (its store was
    unreachable for a moment) with an expired lease, so another worker takes it too. Also
    when the executor already released it on its way out (no owner, no lease), but never
    a run someone else has claimed since."""
    updated = conn.exec_driver_sql(
        "UPDATE runs SET owner_id = NULL, owner_lease_expires_at = ? "
        "WHERE id = ? AND status = 'running' "
        "AND (owner_id = ? OR (owner_id IS NULL AND owner_lease_expires_at IS NULL))",
        (_EPOCH if to_workers else None, run_id, owner_id),
    )
    if updated.rowcount != 1:
        return False
    notify_run(conn, run_id)
    return True


def _waiting(interrupted: bool) -> str:
    """Running runs whose lease has expired and that were released to the workers (no
    owner recorded); with ``interrupted`` also those whose owner died or is cut off."""
    return "status = 'running' AND owner_lease_expires_at IS NOT NULL " + (
        "AND owner_lease_expires_at < ?"
        if interrupted
        else "AND owner_lease_expires_at < ? AND owner_id IS NULL"
    )


def claimable_runs(conn: Any, now: datetime, limit: int, *, interrupted: bool = False) -> list[str]:
    """Up to ``limit`` runs waiting for a worker, oldest first, locked for this
    transaction; rows another worker is claiming right now are skipped, not waited for.

    A run whose driving owner died (it may have died in the middle of a task) is left for
    an operator, as the daemon and the dashboard leave it, unless ``interrupted`` (a
    worker started with ``--recover-interrupted``)."""
    rows = conn.exec_driver_sql(
        f"SELECT id FROM runs WHERE {_waiting(interrupted)} "  # noqa: S608 - fixed text
        "ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
        (to_db(now), limit),
    )
    return [str(row[0]) for row in rows]


def any_claimable_run(conn: Any, now: datetime, *, interrupted: bool = False) -> bool:
    """Whether :func:`claimable_runs` would find a run (a read, without locking)."""
    row = conn.exec_driver_sql(
        f"SELECT 1 FROM runs WHERE {_waiting(interrupted)} LIMIT 1",  # noqa: S608
        (to_db(now),),
    ).first()
    return row is not None


def run_status(conn: Any, run_id: str) -> str | None:
    row = conn.exec_driver_sql("SELECT status FROM runs WHERE id = ?", (run_id,)).first()
    return None if row is None else str(row[0])


class RunsListener:
    """``LISTEN agentctl_runs`` on a connection of its own; :meth:`wait` returns when a
    notification arrived (True) or after ``timeout`` seconds (False)."""

    def __init__(self, conn: Any, url: str) -> None:
        self._conn = conn
        self._url = url
        self._woken = asyncio.Event()
        self._subscribers: dict[asyncio.Event, frozenset[str] | None] = {}
        self._payloads: list[str] = []
        self._task = asyncio.create_task(self._listen())

    @classmethod
    async def open(cls, store: Any) -> RunsListener:
        url = str(store.location)
        return cls(await cls._connect(url), url)

    @staticmethod
    async def _connect(url: str) -> Any:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        await conn.execute(f"LISTEN {CHANNEL}")
        return conn

    async def _listen(self) -> None:
        """Deliver notifications; when the connection is lost (the server restarted),
        wake everyone (what was missed meanwhile is found by looking) and listen again on
        a new connection, with backoff while the server is away."""
        import psycopg

        delay = 0.05
        while True:
            try:
                async for notice in self._conn.notifies():
                    delay = 0.05
                    self._deliver(str(notice.payload))
            except psycopg.OperationalError:
                pass
            self._wake_all()
            await self._conn.close()
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                try:
                    self._conn = await self._connect(self._url)
                    break
                except psycopg.OperationalError:
                    continue
            self._wake_all()

    def _deliver(self, payload: str) -> None:
        if len(self._payloads) < 10_000:
            self._payloads.append(payload)
        self._woken.set()
        for event, wanted in self._subscribers.items():
            if wanted is None or payload in wanted:
                event.set()

    def _wake_all(self) -> None:
        self._woken.set()
        for event in self._subscribers:
            event.set()

    def drain(self) -> list[str]:
        """The notifications' payloads since the last call (a run id, ``approval:…``,
        ``tasks:RUN`` for published tasks, ``done:RUN`` for a task outcome)."""
        payloads, self._payloads = self._payloads, []
        return payloads

    def subscribe(self, payloads: frozenset[str] | None = None) -> asyncio.Event:
        """An event set on every notification whose payload is in ``payloads`` (any when
        None), besides :meth:`wait`: a run owner waiting for its claimed tasks listens on
        the worker's one connection for ``done:RUN``."""
        event = asyncio.Event()
        self._subscribers[event] = payloads
        return event

    def unsubscribe(self, event: asyncio.Event) -> None:
        self._subscribers.pop(event, None)

    async def wait(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), timeout)
        woken = self._woken.is_set()
        self._woken.clear()
        return woken

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
        await self._conn.close()
