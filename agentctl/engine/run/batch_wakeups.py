"""What wakes a run owner on a worker while it waits for its batch's claimed tasks.

Two channels (store/run_queue.py): the run's status on ``agentctl_runs``, which every
worker listens to, and the claimed tasks' outcomes (``done:RUN``) on ``agentctl_done``,
which a worker listens to from the first run it drives, on a connection of its own, so a
worker that only executes tasks is never woken by them (docs/postgresql.md). One
subscription event is set by both.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agentctl.store import run_queue

__all__ = ["OPEN_SECONDS", "BatchWakeups"]

#: The longest a worker waits for the done channel's connection before it drives a run
#: without it (the owner then reads its batch's claims at least once a second).
OPEN_SECONDS = 5.0


class BatchWakeups:
    def __init__(self, store: Any, runs: run_queue.RunsListener) -> None:
        self._store = store
        self._runs = runs
        self._done: run_queue.RunsListener | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    def subscribe(self, payloads: frozenset[str] | None) -> run_queue.Subscription:
        """An event set by a notification in ``payloads`` on either channel."""
        event = self._runs.subscribe(payloads)
        if self._done is not None:
            self._done.attach(event, payloads)
        return event

    def unsubscribe(self, event: asyncio.Event) -> None:
        self._runs.unsubscribe(event)
        if self._done is not None:
            self._done.unsubscribe(event)

    async def listen_for_outcomes(self) -> str | None:
        """Listen on the done channel (once; later calls return at once). Never raises:
        what kept it from listening is returned, and the next call tries again."""
        async with self._opening:
            if self._done is not None or self._closed:
                return None
            import psycopg

            try:
                async with asyncio.timeout(OPEN_SECONDS):
                    self._done = await run_queue.RunsListener.open(
                        self._store, run_queue.DONE_CHANNEL
                    )
            except (psycopg.Error, OSError, TimeoutError) as exc:
                return f"cannot listen on {run_queue.DONE_CHANNEL}: {exc or 'timed out'}"
            return None

    async def close(self) -> None:
        async with self._opening:
            self._closed = True
            done, self._done = self._done, None
        if done is not None:
            with contextlib.suppress(Exception):
                await done.close()
