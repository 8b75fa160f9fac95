"""Run ownership: one owner at a time, a heartbeat lease, and a fencing token.

The owner id is ``host:pid:start:nonce`` where ``start`` is the process start time as the
kernel reports it (``/proc/PID/stat``), so a recycled pid is never mistaken for the owner.
The rules, enforced here and nowhere else:

- A run whose owner is alive on this host (pid exists and started at ``start``) is never
  taken over, whatever its lease says; a long task does not hand its run away.
- An owner on another host is trusted until its lease runs out. The executor's heartbeat
  renews the lease every few seconds while the run executes, independent of task commits.
- Every claim increments ``owner_token`` (the fencing token). Every write an owner makes
  goes through :func:`check_fence` inside its transaction: once another process took the
  run over, the old owner's writes fail with :class:`OwnershipLostError` (exit 5, naming
  the run and the new owner) instead of overwriting what the new owner recorded.

docs/operators-guide.md ("Ownership and fencing") explains what operators see.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from agentctl.errors import BlockedError, NotFoundError, OwnershipLostError
from agentctl.store import locks
from agentctl.store.statements import statement
from agentctl.store.timestamps import to_db

if TYPE_CHECKING:
    from sqlalchemy.sql.expression import Executable

    from agentctl.store.dialect import SqlDialect

__all__ = [
    "Claim",
    "OwnedRun",
    "check_fence",
    "claim",
    "clear_owner",
    "holder_gone",
    "lease_seconds",
    "naive",
    "new_owner_id",
    "owner_alive",
    "release",
    "renew",
]

DEFAULT_LEASE_SECONDS = 60.0


def lease_seconds() -> float:
    """The lease length. ``AGENTCTL_LEASE_SECONDS`` shortens it (tests, and operators who
    want a faster takeover of runs owned by crashed remote workers)."""
    raw = os.environ.get("AGENTCTL_LEASE_SECONDS")
    try:
        value = float(raw) if raw else DEFAULT_LEASE_SECONDS
    except ValueError:
        value = DEFAULT_LEASE_SECONDS
    return max(0.2, value)


def _hostname() -> str:
    # Test-only: make a process look like it runs on another machine, so the lease (not
    # the pid) decides, as it does for a remote worker.
    return os.environ.get("AGENTCTL_TEST_HOSTNAME") or socket.gethostname()


def _read_start_time(pid: int) -> str | None:
    found = _read_stat(pid)
    return None if found is None else found[1]


def _read_stat(pid: int) -> tuple[str, str | None] | None:
    """``(state, start time)`` of ``pid`` from proc(5); ``None`` when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if not fields:
        return None
    # Field 3 is the state; field 22, "starttime", is the 20th after the command name.
    return fields[0], fields[19] if len(fields) > 19 else None


#: This process's start time as ``(pid, start)``: read from ``/proc`` once, not for every
#: owner id (a worker makes one per run it claims, and a read of ``/proc`` costs as much CPU
#: as a statement). Keyed by the pid, so a forked child reads its own.
_started: tuple[int, str] | None = None


def _own_start_time(pid: int) -> str:
    global _started
    known = _started
    if known is not None and known[0] == pid:
        return known[1]
    start = _read_start_time(pid)
    if start is None:
        return "0"  # unreadable (no /proc): read again next time
    _started = (pid, start)
    return start


def new_owner_id() -> str:
    pid = os.getpid()
    return f"{_hostname()}:{pid}:{_own_start_time(pid)}:{secrets.token_hex(4)}"


def _parse(owner_id: str) -> tuple[str, int | None, str | None]:
    parts = owner_id.split(":")
    host = parts[0]
    pid = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    start = parts[2] if len(parts) > 3 else None
    return host, pid, start


def owner_alive(owner_id: str) -> bool:
    """Whether the owner process still exists. Only decidable on this host: an owner on
    another host counts as alive (its lease decides)."""
    host, pid, start = _parse(owner_id)
    if host != _hostname() or pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    found = _read_stat(pid)
    if found is not None and found[0] in ("Z", "X"):
        # A killed owner its parent has not reaped yet is dead: it will never run again,
        # however long the zombie waits (kill(pid, 0) succeeds on it).
        return False
    if start is None or start == "0":
        return True
    current = None if found is None else found[1]
    return current is None or current == start


def holder_gone(holder: str | None, expires: datetime | None, now: datetime) -> bool:
    """Whether a recorded owner can no longer be executing the run: none is recorded, its
    process on this host no longer exists, or it is on another host and its lease ran out.
    A live owner on this host keeps its run whatever its lease says (a long task)."""
    if not holder:
        return True
    if _parse(holder)[0] == _hostname():
        return not owner_alive(holder)
    current = naive(now)
    return expires is None or current is None or expires <= current


@dataclass(frozen=True, slots=True)
class Claim:
    run_id: str
    owner_id: str
    token: int
    previous_owner: str | None


def naive(value: Any) -> datetime | None:
    """A stored timestamp (text on SQLite, ``timestamptz`` on PostgreSQL) as naive UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=None) if isinstance(value, datetime) else None


def _read_owner(conn: Any, run_id: str) -> tuple[str | None, int, datetime | None]:
    row = _read_owner_row.run(conn, run_id=run_id).first()
    if row is None:
        raise NotFoundError(
            f"unknown run {run_id!r}",
            hint="list runs with `agentctl runs list`, or pass the right --db",
            run_id=run_id,
        )
    return row[0], int(row[1] or 0), naive(row[2])


def claim(conn: Any, run_id: str, owner_id: str, now: datetime) -> Claim:
    """Take ownership of ``run_id`` inside the caller's write transaction.

    Refused (exit 3, ``run.owned``) while another owner is alive on this host, or holds an
    unexpired lease from another host. A claim always increments the fencing token, so a
    previous owner that wakes up later can no longer write.
    """
    holder, token, expires = _read_owner(conn, run_id)
    if holder and holder != owner_id:
        if not holder_gone(holder, expires, now):
            raise BlockedError(
                f"run {run_id} is being executed by another agentctl process ({holder})",
                code="run.owned",
                hint=f"wait for it to finish, or stop it with `agentctl cancel {run_id}`",
                run_id=run_id,
            )
    new_token = token + 1
    updated = _claim.run(
        conn,
        owner_id=owner_id,
        new_token=new_token,
        expires_at=to_db(now + timedelta(seconds=lease_seconds())),
        run_id=run_id,
        token=token,
    )
    if updated.rowcount != 1:
        raise OwnershipLostError(
            f"run {run_id} was claimed by another process at the same moment",
            run_id=run_id,
            hint=f"inspect it with `agentctl inspect {run_id}`",
        )
    return Claim(run_id, owner_id, new_token, holder if holder != owner_id else None)


def check_fence(conn: Any, run_id: str, token: int) -> None:
    """Fail unless ``token`` is still the run's fencing token (inside a write transaction,
    so no other writer can change it before this transaction commits)."""
    row = _fence.run(conn, run_id=run_id).first()
    if row is None or int(row[0] or 0) != token:
        holder = None if row is None else row[1]
        raise OwnershipLostError(
            f"this process no longer owns run {run_id}: it was taken over by "
            f"{holder or 'another process'} (fencing token {token} is stale); "
            "nothing was written",
            run_id=run_id,
            hint=f"inspect what the new owner recorded with `agentctl inspect {run_id}`",
        )


def renew(conn: Any, run_id: str, token: int, now: datetime) -> None:
    """Extend the lease (the heartbeat); fails when the run was taken over."""
    updated = _renew.run(
        conn,
        expires_at=to_db(now + timedelta(seconds=lease_seconds())),
        run_id=run_id,
        token=token,
    )
    if updated.rowcount != 1:
        check_fence(conn, run_id, token)


def release(conn: Any, run_id: str, token: int) -> None:
    """Give the run up (no-op when it was already taken over)."""
    _release.run(conn, run_id=run_id, token=token)


def clear_owner(conn: Any, run_id: str) -> None:
    """Drop the owner of a run that has no live owner (an operator ended it)."""
    _clear_owner.run(conn, run_id=run_id)


# -- statements -------------------------------------------------------------------------


def _fenced() -> Any:
    """The run named ``run_id`` while its fencing token is still ``token``."""
    from sqlalchemy import and_, bindparam

    from agentctl.store.run_tables import runs

    return and_(runs.c.id == bindparam("run_id"), runs.c.owner_token == bindparam("token"))


@statement
def _read_owner_row(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs

    c = runs.c
    return select(c.owner_id, c.owner_token, c.owner_lease_expires_at).where(
        c.id == bindparam("run_id")
    )


@statement
def _fence(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, select

    from agentctl.store.run_tables import runs

    return select(runs.c.owner_token, runs.c.owner_id).where(runs.c.id == bindparam("run_id"))


@statement
def _claim(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.run_tables import runs

    return (
        update(runs)
        .where(_fenced())
        .values(
            owner_id=bindparam("owner_id"),
            owner_token=bindparam("new_token"),
            owner_lease_expires_at=bindparam("expires_at"),
        )
    )


@statement
def _renew(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, update

    from agentctl.store.run_tables import runs

    return update(runs).where(_fenced()).values(owner_lease_expires_at=bindparam("expires_at"))


@statement
def _release(_: SqlDialect) -> Executable:
    from sqlalchemy import null, update

    from agentctl.store.run_tables import runs

    return update(runs).where(_fenced()).values(owner_id=null(), owner_lease_expires_at=null())


@statement
def _clear_owner(_: SqlDialect) -> Executable:
    from sqlalchemy import bindparam, null, update

    from agentctl.store.run_tables import runs

    return (
        update(runs)
        .where(runs.c.id == bindparam("run_id"))
        .values(owner_id=null(), owner_lease_expires_at=null(), owner_token=runs.c.owner_token + 1)
    )


class OwnedRun:
    """The store as the owner of one run sees it: every write transaction is fenced.

    The executor, the effect gate and everything they call write through this object, so
    no owner write can skip the fencing check (it runs first in each IMMEDIATE
    transaction, under the run's lock: every write that moves the token holds it too).
    """

    def __init__(self, store: Any, claimed: Claim) -> None:
        self.store = store
        self.claim = claimed
        self.run_id = claimed.run_id
        self.token = claimed.token

    @property
    def path(self) -> str:
        return str(self.store.path)

    def read(self) -> Any:
        return self.store.read()

    def read_one(self) -> Any:
        """A read of one statement (``Store.read_one``: no transaction around it)."""
        return self.store.read_one()

    @contextmanager
    def write(self) -> Iterator[Any]:
        """A write transaction holding the run's lock, the fence checked first in it. On
        PostgreSQL at the driver (:meth:`driver_session`), as the batch commits are: the
        owner's other writes (publishing a batch to the workers, withdrawing its claims)
        cost more CPU in SQLAlchemy's per-statement work than in their statements."""
        if self.store.dialect == "postgresql":
            with self.driver_session() as session, session.write() as conn:
                yield conn
            return
        with self.store.write(locks.run(self.run_id)) as conn:
            check_fence(conn, self.run_id, self.token)
            yield conn

    def driver_session(self) -> Any:
        return self.store.driver_session(
            on_begin=lambda session: check_fence(session, self.run_id, self.token),
            scope=locks.run(self.run_id),
        )

    def row_write(self) -> Any:
        """The transaction that moves one effect to ``started`` (one conditional update of
        that effect's row, and for the owner its task row): fenced like :meth:`write`,
        which it is here. A task claim's fence does it with row locks alone."""
        return self.write()
