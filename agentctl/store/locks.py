"""What a PostgreSQL write transaction serialises on: the store's lock table in code.

SQLite has one writer at a time (``BEGIN IMMEDIATE``) and ignores all of this. On
PostgreSQL a write transaction names what it writes, and takes transaction-scoped advisory
locks for exactly that, in the one round trip of its ``BEGIN`` (a driver session's: its
``BEGIN``, its locks and its first statement, pipelined, :func:`begin_steps`):

- every write takes the store lock (:data:`STORE_KEY`): **shared** when it names its
  scope, **exclusive** when it names none. A write with no scope (an operator's command, a
  migration, a GC batch) therefore still has the whole store to itself, as
  every write had before; the writes of runs never wait for each other on it;
- a write that concerns one run (its transitions, journal, audit chain, checkpoints,
  budgets, the ownership claim and the fencing check) takes that run's lock
  (:func:`run`), exclusive: two writes of one run are serialised, so every read-then-write
  of that run's rows (the fencing check, the audit chain's head, a guarded transition, a
  budget reservation) decides on rows no other writer can change before the commit;
  writes of different runs do not wait for each other;
- a write that concerns one schedule or monitor (a slot's firing, its cursor, linking
  the run it created) takes that schedule's lock (:func:`schedule`), plus the new run's;
- the keys are taken in one order (the store lock first, then by key), so two writes never
  deadlock on them;
- a claimed task's write (a worker executing one task of another process's run) begins
  with the store lock alone and takes its run's lock *late*: right before it first reads
  the run's budget ledger or audit chain head (:func:`hold_run`, which every such reader
  calls), so its writes of its own rows (the effect journal, fenced by the claim's token,
  and its task's audit events, which go to the claim's lane:
  ``observability/audit_lanes.py``) do not wait for the run's other writers, and the
  run's lock is held from the budget statement to the commit only (not at all when the
  effect reserves nothing). Its fencing check comes after the run's lock (the claim's row
  is locked then), or, when it took none, with its ``COMMIT`` (one pipeline: the server
  skips the commit when the fence fails), so every transaction takes a run's lock before
  that run's claim rows:
  the owner's writes hold the run's lock from their ``BEGIN`` and may then withdraw claim
  rows, and no order of the two deadlocks.

A lock is an advisory key: a signed 64-bit hash of its name (:func:`key`), so an operator
can match ``pg_locks.objid`` with ``agentctl``'s names. ``lock_timeout`` bounds every wait
(``store.locked`` after it). docs/postgresql.md ("Locks") has the table: each lock, the
invariant it protects, who takes it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentctl.store.driver_sessions import DriverSession

__all__ = [
    "STORE_KEY",
    "LateRunLock",
    "Locks",
    "RunFence",
    "Step",
    "begin_postgres",
    "begin_steps",
    "hold_run",
    "key",
    "run",
    "schedule",
]

#: The store lock (an arbitrary constant that spells "agentctl" in ASCII, so an operator
#: recognises it in ``pg_locks``): shared by every scoped write, exclusive for the others.
STORE_KEY = 0x6167656E7463746C


@dataclass(frozen=True, slots=True)
class Locks:
    """The scope of a write: the names it holds exclusively (``run:ID``) and shared."""

    exclusive: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()


def run(*run_ids: str) -> Locks:
    """The scope of a write that concerns these runs only."""
    return Locks(exclusive=tuple(f"run:{run_id}" for run_id in run_ids))


def schedule(name: str) -> Locks:
    """The scope of a write that concerns one schedule or monitor: its cursor, its slots'
    firings and observations, and linking a firing to the run it created. Two daemons
    deciding the same schedule are serialised; other schedules and every run go on."""
    return Locks(exclusive=(f"schedule:{name}",))


def hold_run(conn: Any, run_id: str) -> None:
    """Hold ``run_id``'s lock from here to the commit when the transaction on ``conn``
    deferred it (a claimed task's write; a no-op for every other transaction, which holds
    its locks from its ``BEGIN``). Every read-then-write of a run's serialised rows (the
    audit chain's head, the budget ledger) calls this first, so none can be made without
    the lock."""
    late = getattr(conn, "late_run_lock", None)
    if late is not None:
        late.take(conn, run_id)


class RunFence(Protocol):
    """The fencing check of a write that takes its run's lock late (a claimed task's,
    see :func:`hold_run`): the claim's token, checked with the claim's
    row locked until the commit, so nothing of the write lands once the claim is lost."""

    run_id: str

    def lock_and_check(self, conn: DriverSession) -> None:
        """Take the run's lock, then check the fence (one statement)."""
        ...

    def check(self, conn: DriverSession) -> None:
        """Check the fence without the run's lock (one statement)."""
        ...

    def commit(self, conn: DriverSession) -> None:
        """Check the fence without the run's lock and commit (a write that needed none):
        one round trip, the commit skipped by the server when the fence fails."""
        ...


class LateRunLock:
    """One transaction's deferred run lock (``DriverSession.late_run_lock``): taken by
    :func:`hold_run` the first time the transaction reads its run's
    chain head or budget ledger, with the fencing check after it; when nothing asked for
    it, the fence alone is checked before the commit."""

    __slots__ = ("fence", "taken")

    def __init__(self, fence: RunFence) -> None:
        self.fence = fence
        self.taken = False

    def take(self, conn: DriverSession, run_id: str) -> None:
        if run_id != self.fence.run_id:
            raise RuntimeError(
                f"a write fenced for run {self.fence.run_id} touched run {run_id}'s "
                "serialised rows; it holds only its own run's lock"
            )
        if not self.taken:
            self.fence.lock_and_check(conn)
            self.taken = True


def key(name: str) -> int:
    """The advisory lock key of ``name``: its BLAKE2b-64, as a signed ``bigint``."""
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def begin_postgres(locks: Locks | None) -> str:
    """``BEGIN`` and the write's locks in one simple query (one round trip; the keys are
    integers, never text from outside). ``None``: the whole store, exclusive."""
    if locks is None:
        return f"BEGIN; SELECT pg_advisory_xact_lock({STORE_KEY})"
    modes = {key(name): "_shared" for name in locks.shared}
    modes.update({key(name): "" for name in locks.exclusive})
    taken = "; ".join(
        f"SELECT pg_advisory_xact_lock{mode}({value})" for value, mode in sorted(modes.items())
    )
    return f"BEGIN; SELECT pg_advisory_xact_lock_shared({STORE_KEY})" + (
        f"; {taken}" if taken else ""
    )


#: A pipelined ``BEGIN``'s lock statements: the key is a parameter, so each is prepared once
#: per connection whatever the key (a simple query's text was parsed and planned each time).
SHARED_LOCK = "SELECT pg_advisory_xact_lock_shared(%s)"
EXCLUSIVE_LOCK = "SELECT pg_advisory_xact_lock(%s)"


#: One statement of a pipelined ``BEGIN``: its text and its parameters (None: none).
Step = tuple[str, tuple[int, ...] | None]


def begin_steps(locks: Locks | None, begin: str = "BEGIN") -> tuple[Step, ...]:
    """:func:`begin_postgres`'s statements one by one, in the same order, for one pipelined
    round trip (``ServerStatements.pipeline``): ``BEGIN``, the store lock, then the scope's
    locks by key."""
    if locks is None:
        return ((begin, None), (EXCLUSIVE_LOCK, (STORE_KEY,)))
    modes = {key(name): SHARED_LOCK for name in locks.shared}
    modes.update({key(name): EXCLUSIVE_LOCK for name in locks.exclusive})
    return (
        (begin, None),
        (SHARED_LOCK, (STORE_KEY,)),
        *((text, (value,)) for value, text in sorted(modes.items())),
    )
