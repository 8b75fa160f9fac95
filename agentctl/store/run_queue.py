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
so idle workers and ``runs wait`` wake at once instead of polling fast. A claimed task's
outcome wakes its run's owner on another channel, ``agentctl_done`` (payload
``done:RUN``), which only workers that drive runs listen to: every worker hearing every
outcome cost each of them a read and a round of its loop per task of any run.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agentctl.store import locks
from agentctl.store.dialect import sql_dialect
from agentctl.store.statements import Statement, statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = [
    "CHANNEL",
    "DONE_CHANNEL",
    "RunsListener",
    "Subscription",
    "any_claimable_run",
    "claimable_runs",
    "give_back",
    "notify_run",
    "release_to_workers",
    "run_status",
    "try_run_lock",
]

CHANNEL = "agentctl_runs"
#: Where a claimed task's outcome is announced (``done:RUN``): heard by run owners only.
DONE_CHANNEL = "agentctl_done"
_EPOCH = "1970-01-01 00:00:00.000000"


def notify_run(conn: Any, run_id: str) -> None:
    """Wake listeners when this transaction commits (nothing to do on SQLite)."""
    if sql_dialect(conn.dialect.name).notifies:
        _notify.run(conn, payload=run_id)


@statement
def _notify(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    return select(func.pg_notify(CHANNEL, bindparam("payload")))


def try_run_lock(conn: Any, run_id: str) -> bool:
    """Take ``run_id``'s lock (:func:`agentctl.store.locks.run`) inside a scoped write
    without waiting (a worker claiming runs or tasks it found with ``SKIP LOCKED``): False
    when a write of that run is in flight, and the run is passed by like a locked row.
    Always True where writes take no advisory locks (SQLite: one writer)."""
    if not sql_dialect(conn.dialect.name).advisory_locks:
        return True
    (name,) = locks.run(run_id).exclusive
    return bool(_try_lock.run(conn, key=locks.key(name)).first()[0])


@statement
def _try_lock(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, func, select

    return select(func.pg_try_advisory_xact_lock(bindparam("key")))


def release_to_workers(conn: Any, run_id: str) -> bool:
    """Hand an unowned running run to the workers (False when someone owns it already)."""
    updated = _release_to_workers.run(conn, run_id=run_id)
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
    updated = _give_back.run(
        conn, expires_at=_EPOCH if to_workers else None, run_id=run_id, owner_id=owner_id
    )
    if updated.rowcount != 1:
        return False
    notify_run(conn, run_id)
    return True


@statement
def _release_to_workers(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.run_tables import runs

    c = runs.c
    return (
        update(runs)
        .where(c.id == bindparam("run_id"), c.status == "running", c.owner_id.is_(None))
        .values(owner_lease_expires_at=_EPOCH)
    )


@statement
def _give_back(_: SqlDialect) -> Executable:
    from sqlalchemy import and_, bindparam, null, or_, update

    from agentctl.store.run_tables import runs

    c = runs.c
    return (
        update(runs)
        .where(
            c.id == bindparam("run_id"),
            c.status == "running",
            or_(
                c.owner_id == bindparam("owner_id"),
                and_(c.owner_id.is_(None), c.owner_lease_expires_at.is_(None)),
            ),
        )
        .values(owner_id=null(), owner_lease_expires_at=bindparam("expires_at"))
    )


@lru_cache(maxsize=4)
def _waiting(interrupted: bool, *, claim: bool) -> Statement:
    """Running runs whose lease has expired and that were released to the workers (no
    owner recorded); with ``interrupted`` also those whose owner died or is cut off. To
    ``claim`` them: the oldest ``limit``, locked, skipping rows another transaction holds
    (PostgreSQL; SQLite's one writer holds them all); else whether there is one."""

    def build(_: SqlDialect) -> Executable:
        from sqlalchemy import bindparam, literal_column, select

        from agentctl.store.run_tables import runs

        c = runs.c
        waiting = [
            c.status == "running",
            c.owner_lease_expires_at.is_not(None),
            c.owner_lease_expires_at < bindparam("now"),
        ]
        if not interrupted:
            waiting.append(c.owner_id.is_(None))
        if not claim:
            return select(literal_column("1")).select_from(runs).where(*waiting).limit(1)
        return (
            select(c.id)
            .where(*waiting)
            .order_by(c.created_at, c.id)
            .limit(bindparam("limit"))
            .with_for_update(skip_locked=True)
        )

    return Statement(build, f"waiting({interrupted}, claim={claim})")


def claimable_runs(conn: Any, now: datetime, limit: int, *, interrupted: bool = False) -> list[str]:
    """Up to ``limit`` runs waiting for a worker, oldest first, locked for this
    transaction; rows another worker is claiming right now are skipped, not waited for.

    A run whose driving owner died (it may have died in the middle of a task) is left for
    an operator, as the daemon and the dashboard leave it, unless ``interrupted`` (a
    worker started with ``--recover-interrupted``)."""
    rows = _waiting(interrupted, claim=True).run(conn, now=to_db(now), limit=limit)
    return [str(row[0]) for row in rows]


def any_claimable_run(conn: Any, now: datetime, *, interrupted: bool = False) -> bool:
    """Whether :func:`claimable_runs` would find a run (a read, without locking)."""
    row = _waiting(interrupted, claim=False).run(conn, now=to_db(now)).first()
    return row is not None


def run_status(conn: Any, run_id: str) -> str | None:
    row = _run_status.run(conn, run_id=run_id).first()
    return None if row is None else str(row[0])


@statement
def _run_status(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs

    return select(runs.c.status).where(runs.c.id == bindparam("run_id"))


class Subscription(asyncio.Event):
    """An event set on each notification a subscriber asked for, which also keeps their
    payloads until :meth:`heard` takes them (an empty payload: the listener reconnected,
    and what was sent meanwhile is lost)."""

    def __init__(self) -> None:
        super().__init__()
        self._heard: list[str] = []

    def hear(self, payload: str) -> None:
        if len(self._heard) < 10_000:
            self._heard.append(payload)
        self.set()

    def heard(self) -> list[str]:
        heard, self._heard = self._heard, []
        return heard


class RunsListener:
    """``LISTEN agentctl_runs`` (or ``channel``) on a connection of its own; :meth:`wait`
    returns when a notification arrived (True) or after ``timeout`` seconds (False)."""

    def __init__(self, conn: Any, url: str, channel: str = CHANNEL) -> None:
        self._conn = conn
        self._url = url
        self._channel = channel
        self._woken = asyncio.Event()
        self._subscribers: dict[Subscription, frozenset[str] | None] = {}
        self._payloads: list[str] = []
        self._task = asyncio.create_task(self._listen())

    @classmethod
    async def open(cls, store: Any, channel: str = CHANNEL) -> RunsListener:
        url = str(store.location)
        return cls(await cls._connect(url, channel), url, channel)

    @staticmethod
    async def _connect(url: str, channel: str) -> Any:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            await conn.execute(f"LISTEN {channel}")
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
            raise
        return conn

    async def _listen(self) -> None:
        """Deliver notifications; when the connection is lost (the server restarted),
        wake everyone (what was missed meanwhile is found by looking) and listen again on
        a new connection, with backoff while the server is away.

        The connection's socket is watched by one reader callback for as long as it
        lives, which takes what arrived and delivers it (:meth:`_readable`): psycopg's
        ``notifies()`` generator registered and removed a reader, and made a future and a
        timer, for every wait, that is for every notification, which every worker hears
        (a claimed task's outcome sends one)."""
        import psycopg

        loop = asyncio.get_running_loop()
        delay = 0.05
        while True:
            lost: asyncio.Future[None] = loop.create_future()
            fd = self._conn.pgconn.socket
            loop.add_reader(fd, self._readable, lost)
            try:
                self._readable(lost)  # what libpq read with the LISTEN's answer
                await lost
            finally:
                loop.remove_reader(fd)
            delay = 0.05
            self._wake_all()
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                try:
                    self._conn = await self._connect(self._url, self._channel)
                    break
                except psycopg.OperationalError:
                    continue
            self._wake_all()

    def _readable(self, lost: asyncio.Future[None]) -> None:
        """The socket is readable: take what arrived and deliver its notifications; a
        connection that failed settles ``lost``."""
        import psycopg

        pgconn = self._conn.pgconn
        try:
            pgconn.consume_input()
        except psycopg.OperationalError:
            if not lost.done():
                lost.set_result(None)
            return
        encoding = self._conn.info.encoding
        while (notice := pgconn.notifies()) is not None:
            self._deliver(notice.extra.decode(encoding))

    def _deliver(self, payload: str) -> None:
        # Only the runs channel's payloads are drained (by the worker's loop).
        if self._channel == CHANNEL and len(self._payloads) < 10_000:
            self._payloads.append(payload)
        self._woken.set()
        for event, wanted in self._subscribers.items():
            if wanted is None or payload in wanted:
                event.hear(payload)

    def _wake_all(self) -> None:
        self._woken.set()
        for event in self._subscribers:
            event.hear("")

    def drain(self) -> list[str]:
        """The notifications' payloads since the last call (a run id, ``approval:…``,
        ``tasks:RUN`` for published tasks, ``done:RUN`` for a task outcome)."""
        payloads, self._payloads = self._payloads, []
        return payloads

    def subscribe(self, payloads: frozenset[str] | None = None) -> Subscription:
        """An event set on every notification whose payload is in ``payloads`` (any when
        None), besides :meth:`wait`: a run owner waiting for its claimed tasks listens for
        ``done:RUN`` (on the done channel's listener) and its run's id (on this one)."""
        event = Subscription()
        self._subscribers[event] = payloads
        return event

    def attach(self, event: Subscription, payloads: frozenset[str] | None) -> None:
        """Set ``event`` on this listener's notifications in ``payloads`` too (one event
        woken by two channels)."""
        self._subscribers[event] = payloads

    def unsubscribe(self, event: asyncio.Event) -> None:
        if isinstance(event, Subscription):
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
