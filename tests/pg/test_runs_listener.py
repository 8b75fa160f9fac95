"""The workers' listener on a real PostgreSQL server: every notification is delivered
by one reader callback that lives as long as the connection (psycopg's ``notifies()``
registered and removed a reader, with a future and a timer, for each notification, and
every worker hears every claimed task's outcome), and a connection the server ends is
replaced, waking every subscriber (store/run_queue.py). Counts, never times."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentctl.store import run_queue
from agentctl.store.engine import open_store
from tests.pg.backends import execute, rows


async def _heard(subscription: run_queue.Subscription, count: int) -> list[str]:
    heard: list[str] = []
    while len(heard) < count:
        await asyncio.wait_for(subscription.wait(), 10)
        subscription.clear()
        heard += subscription.heard()
    return heard


def test_notifications_are_delivered_by_one_reader_for_the_connections_life(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    added: list[int] = []
    readers: list[int] = []
    store = open_store(postgres_url)

    async def main() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        original = type(loop).add_reader

        def counted(self: Any, fd: int, *args: Any) -> Any:
            added.append(fd)
            return original(self, fd, *args)

        monkeypatch.setattr(type(loop), "add_reader", counted)
        listener = await run_queue.RunsListener.open(store)
        subscription = listener.subscribe(frozenset({"done:r1"}))
        try:
            await asyncio.sleep(0.1)
            before = len(added)
            for n in range(30):
                payload = "done:r1" if n % 2 == 0 else "tasks:r1"
                await asyncio.to_thread(
                    execute, postgres_url, f"NOTIFY {run_queue.CHANNEL}, '{payload}'"
                )
            heard = await _heard(subscription, 15)
            readers.append(len(added) - before)
            # The server ends the listener's connection: a new one is made, and every
            # subscriber is woken with an empty payload (what was missed is looked for).
            await asyncio.to_thread(
                rows,
                postgres_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'",
            )
            # Woken when the connection is lost, and again once the new one listens.
            woken = await _heard(subscription, 2)
            await asyncio.to_thread(execute, postgres_url, f"NOTIFY {run_queue.CHANNEL}, 'done:r1'")
            while "done:r1" not in woken:
                woken += await _heard(subscription, 1)
            return heard, woken
        finally:
            listener.unsubscribe(subscription)
            await listener.close()

    try:
        heard, woken = asyncio.run(main())
    finally:
        store.close()
    assert heard == ["done:r1"] * 15
    assert woken[:2] == ["", ""] and woken[2:] == ["done:r1"]
    # The reader registered once per connection, not once per notification.
    assert readers == [0], readers


def test_a_done_channel_that_cannot_be_opened_is_reported_and_the_runs_channel_still_wakes(
    postgres_url: str,
) -> None:
    """A worker that cannot open its done channel's connection (here: nothing listens on
    the port) gets the reason back, never an exception, and an owner's subscription is
    still woken by its run's status on the runs channel."""
    from types import SimpleNamespace

    from agentctl.engine.run.batch_wakeups import BatchWakeups

    store = open_store(postgres_url)
    unreachable = SimpleNamespace(location="postgresql://agentctl@127.0.0.1:1/none")

    async def main() -> tuple[str | None, list[str]]:
        runs = await run_queue.RunsListener.open(store)
        wakeups = BatchWakeups(unreachable, runs)
        try:
            problem = await wakeups.listen_for_outcomes()
            event = wakeups.subscribe(frozenset({"done:r1", "r1"}))
            await asyncio.to_thread(execute, postgres_url, f"NOTIFY {run_queue.CHANNEL}, 'r1'")
            heard = await _heard(event, 1)
            wakeups.unsubscribe(event)
            return problem, heard
        finally:
            await wakeups.close()
            await runs.close()

    try:
        problem, heard = asyncio.run(main())
    finally:
        store.close()
    assert problem is not None and run_queue.DONE_CHANNEL in problem, problem
    assert heard == ["r1"]
