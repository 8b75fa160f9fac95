"""What runs beside a run's tasks: the cancel/deadline watcher and the lease heartbeat.

:class:`RunWatchers` is a part of :class:`~agentctl.engine.run.executor.RunExecutor` (a mixin:
the executor's state is its own). The watcher polls the durable cancel flag and the wall
deadline and cancels the driver on either; the heartbeat renews the ownership lease and
stops the execution when another process has taken the run over (docs/durable-execution.md).
"""

from __future__ import annotations

import asyncio

from agentctl.engine.core.records import RunRow
from agentctl.engine.run.outcome import ExecutionOptions, RunOutcome
from agentctl.errors import AgentctlError, Cancelled, OwnershipLostError
from agentctl.ids import Clock
from agentctl.store import locks, ownership, runs_repo
from agentctl.store.engine import Store

__all__ = ["RunWatchers"]


class RunWatchers:
    """Cancellation, deadline and lease renewal while :class:`RunExecutor` drives a run."""

    store: Store
    run_id: str
    clock: Clock
    options: ExecutionOptions
    run: RunRow
    owned: ownership.OwnedRun
    _cancel_reason: str | None
    _deadline_passed: bool
    _last_cancel_check: float
    _lost: OwnershipLostError | None

    async def _watch_cancel(self, drive: asyncio.Task[RunOutcome]) -> None:
        """Poll the durable cancel flag and the deadline while the run executes; on either,
        cancel the driver, whose in-flight effects then record what is known of them."""
        while not drive.done():
            await asyncio.sleep(self.options.cancel_poll_seconds)
            try:
                self._check_cancel_and_deadline()
            except Cancelled as stop:
                self._cancel_reason = stop.reason
                drive.cancel()
                return
            except AgentctlError:
                # The flag could not be read (the server restarting): look again next
                # time. Ending here would raise from the executor's clean-up, before it
                # gives the run up.
                continue

    async def _heartbeat(self, drive: asyncio.Task[RunOutcome]) -> None:
        """Renew the ownership lease while the run executes, whatever its tasks do: a task
        longer than the lease never lets another process take a live run over. A renewal
        that finds the run taken over stops this execution (its writes would fail anyway)."""
        if self.store.in_memory:
            return
        interval = ownership.lease_seconds() / 4
        while not drive.done():
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(self._renew_lease)
            except OwnershipLostError as lost:
                self._lost = lost
                drive.cancel()
                return
            except AgentctlError:
                continue  # a busy database: the next beat tries again, well within the lease

    def _renew_lease(self) -> None:
        with self.store.write(locks.run(self.run_id)) as conn:
            ownership.renew(conn, self.run_id, self.owned.token, self.clock.now())

    def _check_cancel_and_deadline(self, *, force: bool = True) -> None:
        """Raise ``Cancelled`` for a durable cancel request or a passed deadline.

        The deadline is fixed at creation, so it is checked in memory; the cancel flag is a
        one-column read, done at most every ``cancel_poll_seconds`` between batches.
        """
        deadline = self.run.deadline_at
        if deadline is not None and (
            self.clock.now().replace(tzinfo=None) > deadline.replace(tzinfo=None)
        ):
            self._deadline_passed = True
            raise Cancelled(
                "deadline passed (runtime.budgets.maxWallTimeSeconds)", run_id=self.run_id
            )
        now = self.clock.monotonic()
        if not force and now - self._last_cancel_check < self.options.cancel_poll_seconds:
            return
        self._last_cancel_check = now
        with self.store.read_one() as conn:
            row = runs_repo.cancel_flag(conn, self.run_id)
        if row is not None and row[0]:
            raise Cancelled(row[1] or "cancel requested", run_id=self.run_id)
