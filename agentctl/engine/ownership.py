"""One process executes a run at a time: an owner lease on the run row.

The owner id is ``host:pid:token``. A live owner's lease is respected; a lease whose holder
is a dead process on this host, or whose time ran out, is taken over. The lease is renewed
as the run commits transitions.
"""

from __future__ import annotations

import os
import secrets
import socket
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.engine import Connection

from agentctl.engine.records import RunRow
from agentctl.errors import BlockedError
from agentctl.store.engine import SqlRunner
from agentctl.store.tables import runs

__all__ = ["LEASE_SECONDS", "claim", "new_owner_id", "owner_alive", "release", "renew"]

LEASE_SECONDS = 60


def new_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def owner_alive(owner_id: str) -> bool:
    """Whether the owner process still exists (only decidable on this host)."""
    host, _, rest = owner_id.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _naive(value: datetime) -> datetime:
    return value.replace(tzinfo=None)


def claim(conn: Connection, run: RunRow, owner_id: str, now: datetime) -> None:
    holder = run.owner_id
    if holder and holder != owner_id:
        expires = run.owner_lease_expires_at
        live_lease = expires is not None and _naive(expires) > _naive(now)
        if live_lease and owner_alive(holder):
            raise BlockedError(
                f"run {run.id} is being executed by another agentctl process ({holder})",
                code="run.owned",
                hint=f"wait for it to finish, or stop it with `agentctl cancel {run.id}`",
                run_id=run.id,
            )
    conn.execute(
        update(runs)
        .where(runs.c.id == run.id)
        .values(owner_id=owner_id, owner_lease_expires_at=now + timedelta(seconds=LEASE_SECONDS))
    )


def renew(conn: SqlRunner, run_id: str, owner_id: str, now: datetime) -> None:
    from agentctl.engine.records import sqlite_timestamp

    conn.exec_driver_sql(
        "UPDATE runs SET owner_lease_expires_at = ? WHERE id = ? AND owner_id = ?",
        (sqlite_timestamp(now + timedelta(seconds=LEASE_SECONDS)), run_id, owner_id),
    )


def release(conn: Connection, run_id: str, owner_id: str) -> None:
    conn.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.owner_id == owner_id)
        .values(owner_id=None, owner_lease_expires_at=None)
    )
