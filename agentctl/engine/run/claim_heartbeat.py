"""One heartbeat for every task a worker executes under a claim (PostgreSQL workers).

A claimed task's lease must be renewed while it runs, and the task stopped when its claim
is lost or its run is cancelled, past its deadline or no longer running
(:mod:`agentctl.engine.run.claimed_tasks`). Each claim used to have a heartbeat of its own:
a task and a timer per claim, and each period a read of its run and an update of its
row, two statements per live claim per period. The worker now has one: each period
(a quarter of the lease, at most a second) one statement renews the leases of all of
its live claims whose run is still running and says which of those runs have a cancel
request (:func:`claim_fences.renew_held_claims`). A claim it did not renew is looked at
on its own (its run's status, then its fence), which only happens when something ended:

- its run's deadline passed (known in memory: the claim is not renewed), the run was
  cancelled or is no longer ``running``: the task is cancelled and ends ``stopped``;
- the claim was withdrawn or taken over: the task is cancelled and ends ``lost``.

A beat that fails (a busy database, a server restarting) is tried again the next period,
well within the lease, as before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentctl.errors import OwnershipLostError
from agentctl.ids import Clock
from agentctl.store import claim_fences, ownership, task_claims_repo
from agentctl.store.claim_fences import HeldClaim
from agentctl.store.engine import Store
from agentctl.store.task_claims_repo import ClaimedTask

__all__ = ["ClaimHeartbeat", "Held"]


@dataclass(eq=False)
class Held:
    """A claim under the heartbeat: its key, its run's deadline, the task executing it,
    and, once the heartbeat cancelled that task, why (``stopped`` or ``lost``)."""

    key: HeldClaim
    deadline: datetime | None
    work: asyncio.Future[Any]
    reason: str | None = None


class ClaimHeartbeat:
    """The heartbeat of one worker's claims (one asyncio loop's): :meth:`hold` a claim
    while its task runs, :meth:`release` it after. The beating task lives while any claim
    is held."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._held: dict[HeldClaim, Held] = {}
        self._beating: asyncio.Task[None] | None = None

    def hold(
        self, claimed: ClaimedTask, deadline: datetime | None, work: asyncio.Future[Any]
    ) -> Held:
        held = Held((claimed.run_id, claimed.task_id, claimed.token), deadline, work)
        self._held[held.key] = held
        if self._beating is None or self._beating.done():
            self._beating = asyncio.get_running_loop().create_task(self._beat_while_held())
        return held

    def release(self, held: Held) -> None:
        if self._held.get(held.key) is held:
            del self._held[held.key]

    def held(self) -> int:
        """How many claims are held now."""
        return len(self._held)

    async def _beat_while_held(self) -> None:
        lease = ownership.lease_seconds()
        while self._held:
            await asyncio.sleep(min(lease / 4, 1.0))
            held = list(self._held.values())
            if not held:
                return
            try:
                ended = await asyncio.to_thread(self._beat, held, lease)
            except Exception:  # noqa: BLE001 - a busy database: the next beat tries again
                continue
            for item, reason in ended:
                # Released meanwhile (its task ended on its own): nothing to stop.
                if self._held.get(item.key) is item and item.reason is None:
                    item.reason = reason
                    item.work.cancel()

    def _beat(self, held: list[Held], lease: float) -> list[tuple[Held, str]]:
        """Renew what may go on; the claims whose task must stop, and why."""
        now = self.clock.now()
        naive = now.replace(tzinfo=None)
        ended: list[tuple[Held, str]] = []
        live: list[Held] = []
        for item in held:
            if item.deadline is not None and naive > item.deadline.replace(tzinfo=None):
                ended.append((item, "stopped"))
            else:
                live.append(item)
        if not live:
            return ended
        with self.store.autocommit() as conn:  # one conditional update of every claim
            renewed = claim_fences.renew_held_claims(conn, [h.key for h in live], now, lease)
        left = [h for h in live if h.key not in renewed]
        ended += [(h, "stopped") for h in live if renewed.get(h.key)]  # a cancel request
        if left:
            ended += self._why(left)
        return ended

    def _why(self, left: list[Held]) -> list[tuple[Held, str]]:
        """Claims the renewal passed by: their run stopped, or they were lost (each looked
        at on its own, as each claim's heartbeat did; this happens once per ending)."""
        ended: list[tuple[Held, str]] = []
        runs: dict[str, bool] = {}
        for item in left:
            run_id, task_id, token = item.key
            if run_id not in runs:
                with self.store.read_one() as conn:
                    status, cancel_requested = task_claims_repo.run_watch(conn, run_id)
                runs[run_id] = status == "running" and not cancel_requested
            if not runs[run_id]:
                ended.append((item, "stopped"))
                continue
            try:
                with self.store.read_one() as conn:
                    claim_fences.check_claim(conn, run_id, task_id, token)
            except OwnershipLostError:
                ended.append((item, "lost"))
        return ended
