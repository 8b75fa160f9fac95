"""An attempt's deadline (engine/run/deadlines.py) arms its timer only when the body first
waits: a body that finishes without waiting costs no timer, and one that waits is held to
the deadline counted from the attempt's start, exactly as a timer armed up front would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.records import Attempt
from agentctl.engine.run.deadlines import bounded, excluding_person_waits
from agentctl.signals import TaskFailure
from agentctl.store.engine import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with open_store(str(tmp_path / "deadline.db")) as opened:
        yield opened


def _run(body: Any, store: Store, seconds: float = 0.2) -> Any:
    async def main() -> Any:
        return await bounded(body, seconds=seconds, store=store, attempt=Attempt("r", "t", 1))

    return asyncio.run(main())


def test_a_body_that_never_waits_arms_no_timer(store: Store) -> None:
    seen: list[int] = []

    async def body() -> str:
        return "done"

    async def main() -> str:
        loop = asyncio.get_running_loop()
        result = await bounded(body(), seconds=5, store=store, attempt=Attempt("r", "t", 1))
        seen.append(len(loop._scheduled))  # type: ignore[attr-defined]  # noqa: SLF001
        return result

    assert asyncio.run(main()) == "done"
    assert seen == [0]


def test_a_body_that_never_waits_is_not_stopped_even_past_its_deadline(store: Store) -> None:
    # As with a timer armed up front: a timer fires only while the body waits.
    async def body() -> int:
        time.sleep(0.05)
        return 7

    assert _run(body(), store, seconds=0.01) == 7


def _times_out(body: Coroutine[Any, Any, None], store: Store) -> None:
    """``body`` under a 0.1 s deadline fails with ``task.timeout``, long before its 5 s wait."""
    started = time.monotonic()
    with pytest.raises(TaskFailure) as failure:
        _run(body, store, seconds=0.1)
    assert failure.value.code == "task.timeout"
    assert time.monotonic() - started < 3


def test_a_body_that_waits_past_its_deadline_times_out(store: Store) -> None:
    async def body() -> None:
        await asyncio.sleep(5)

    _times_out(body(), store)


def test_the_deadline_counts_from_the_start_not_from_the_first_wait(store: Store) -> None:
    async def body() -> None:
        time.sleep(0.15)  # the deadline passes before the body first waits
        await asyncio.sleep(5)

    _times_out(body(), store)


def test_a_body_that_waits_and_finishes_in_time_returns_its_value(store: Store) -> None:
    async def body() -> dict[str, int]:
        await asyncio.sleep(0)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, 3)
        got = await future
        try:
            await asyncio.wait_for(asyncio.sleep(5), 0.01)
        except TimeoutError:
            got += 1  # the body's own timeout is handed to it, not taken for the deadline
        return {"got": got}

    assert _run(body(), store, seconds=2) == {"got": 4}


def test_a_timeout_error_of_the_bodys_own_is_not_the_deadline(store: Store) -> None:
    async def body() -> None:
        await asyncio.sleep(0)
        raise TimeoutError("mine")

    with pytest.raises(TimeoutError, match="mine"):
        _run(body(), store, seconds=2)

    async def at_once() -> None:
        raise TimeoutError("before waiting")

    with pytest.raises(TimeoutError, match="before waiting"):
        _run(at_once(), store, seconds=2)


def test_a_cancel_from_outside_reaches_the_body_and_is_not_a_timeout(store: Store) -> None:
    cleaned: list[str] = []

    async def body() -> None:
        try:
            await asyncio.sleep(5)
        finally:
            cleaned.append("body")

    async def main() -> None:
        task = asyncio.create_task(
            bounded(body(), seconds=10, store=store, attempt=Attempt("r", "t", 1))
        )
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == ["body"]


def test_a_persons_wait_before_the_body_first_waits_is_not_its_time(store: Store) -> None:
    async def person(_request: dict[str, Any]) -> bool:
        await asyncio.sleep(0.3)  # longer than the deadline
        return True

    approver = excluding_person_waits(person)
    assert approver is not None

    async def body() -> str:
        assert await approver({"operation": "write"})
        await asyncio.sleep(0.05)  # within what was left of the deadline
        return "approved"

    assert _run(body(), store, seconds=0.2) == "approved"

    async def slow_after() -> str:
        assert await approver({"operation": "write"})
        await asyncio.sleep(5)
        return "never"

    with pytest.raises(TaskFailure) as failure:
        _run(slow_after(), store, seconds=0.2)
    assert failure.value.code == "task.timeout"
