"""A task attempt's time bound: ``timeoutSeconds`` holds for every task kind.

Each attempt of a task — an action, an agent with all its model turns and tool calls, a
protocol call — runs under one deadline. When it passes, the in-flight call is cancelled;
the effect gate records a dispatched effect as ``uncertain`` (it may have happened), and
the attempt fails with ``task.timeout``. Whether the retry policy may then try again
depends on what was left uncertain: nothing, or only idempotent effects, is safe; anything
else (a model call, a process, an unknown remote mutation) is not, and the task stays
failed until an operator reconciles the effect.

Time spent waiting for a person to answer an interactive approval prompt does not count:
the deadline is pushed back by the length of the wait.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

from agentctl import hints
from agentctl.engine.core.records import Attempt
from agentctl.engine.effects import journal
from agentctl.signals import TaskFailure
from agentctl.store.engine import Store

__all__ = ["SAFE_IDEMPOTENCY", "bounded", "excluding_person_waits", "resumed"]

T = TypeVar("T")

#: An uncertain effect of one of these kinds may be dispatched again by a new attempt.
SAFE_IDEMPOTENCY = frozenset({"idempotent", "pure"})

_SCOPE: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar(
    "agentctl_task_deadline", default=None
)


class _Deadline:
    """The deadline of the attempt running in this context: ``when`` on the loop's clock
    (None while a person's wait holds it), and the timer's scope once one is armed."""

    __slots__ = ("scope", "when")

    def __init__(self, when: float | None) -> None:
        self.when = when
        self.scope: asyncio.Timeout | None = None

    def move(self, when: float | None) -> None:
        self.when = when
        if self.scope is not None:
            self.scope.reschedule(when)


async def bounded(
    work: Coroutine[Any, Any, T], *, seconds: float, store: Store, attempt: Attempt
) -> T:
    """Run one attempt's body under its deadline; a passed deadline is ``task.timeout``.

    The deadline counts from here, but its timer is armed only when the body first waits
    (suspends): a timer fires only while the body waits, so a body that finishes without
    waiting (a builtin step such as ``builtin.assign``) could never be stopped by one, and
    is spared arming and cancelling it. A body that does wait is under the same deadline as
    if the timer had been armed here: one passed already fires at once."""
    loop = asyncio.get_running_loop()
    deadline = _Deadline(loop.time() + seconds)
    token = _SCOPE.set(deadline)
    try:
        try:
            pending = work.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        scope = asyncio.timeout_at(deadline.when)
        try:
            async with scope:
                deadline.scope = scope
                return await resumed(work, pending)
        except TimeoutError:
            if not scope.expired():
                raise  # a TimeoutError of the body's own making, not this deadline
            raise _timeout_failure(store, attempt, seconds) from None
    finally:
        _SCOPE.reset(token)
        work.close()  # a no-op once it has finished; never leaves it half-run


@types.coroutine
def resumed(work: Coroutine[Any, Any, T], pending: Any) -> Generator[Any, Any, T]:
    """Go on with ``work`` after its first step yielded ``pending``, exactly as ``await``
    would have: what it yields goes to the task, what the task sends or throws goes back."""
    while True:
        thrown: BaseException | None = None
        sent: Any = None
        try:
            sent = yield pending
        except GeneratorExit:
            work.close()
            raise
        except BaseException as exc:  # handed to the body, as await would
            thrown = exc
        try:
            if thrown is None:
                pending = work.send(sent)
            else:
                pending = work.throw(thrown)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            thrown = None


def _timeout_failure(store: Store, attempt: Attempt, seconds: float) -> TaskFailure:
    with store.read() as conn:
        records = [journal.get_effect(conn, eid) for eid in attempt.effect_ids]
    uncertain = [r for r in records if r is not None and r.status == "uncertain"]
    unsafe = [r for r in uncertain if r.idempotency not in SAFE_IDEMPOTENCY]
    message = (
        f"task {attempt.task_id} timed out after {seconds:g}s (timeoutSeconds) "
        f"on attempt {attempt.attempt}"
    )
    if unsafe:
        first = unsafe[0]
        message += (
            f"; its {first.operation} effect {first.id} was in flight and is now uncertain, "
            "so the retry policy does not repeat it: check whether it happened, record that "
            f"with {hints.quoted(hints.reconcile(first.id))}, then retry the run (the "
            "commands are listed under help)"
        )
    return TaskFailure(
        message,
        code="task.timeout",
        details={
            "timeoutSeconds": seconds,
            "attempt": attempt.attempt,
            "uncertainEffects": [{"effectId": r.id, "operation": r.operation} for r in uncertain],
            "retrySafe": not unsafe,
        },
    )


def excluding_person_waits(
    approver: Callable[[dict[str, Any]], Awaitable[bool]] | None,
) -> Callable[[dict[str, Any]], Awaitable[bool]] | None:
    """Wrap an interactive approver so the time a person takes is not the task's time."""
    if approver is None:
        return None
    ask = approver

    async def wrapped(request: dict[str, Any]) -> bool:
        deadline = _SCOPE.get()
        when = deadline.when if deadline is not None else None
        if deadline is None or when is None:
            return await ask(request)
        loop = asyncio.get_running_loop()
        remaining = when - loop.time()
        deadline.move(None)
        try:
            return await ask(request)
        finally:
            deadline.move(loop.time() + max(remaining, 0.0))

    return wrapped
