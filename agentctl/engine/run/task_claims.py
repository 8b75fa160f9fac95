"""Task-level claims, the run owner's side: a parallel batch spread over workers.

With PostgreSQL and ``agentctl worker``, the owner of a run does not execute a batch of
several ready tasks itself. It publishes them as claimable rows
(:mod:`agentctl.store.task_claims_repo`) in a write fenced by its own ownership token, and
waits; any worker with free capacity claims a row under a lease with its own fencing token,
executes the task through the ordinary effect protocol (:mod:`agentctl.engine.run.claimed_tasks`)
and records the outcome on the row in one fenced transaction. The owner then reads the
outcomes and returns them to the executor, which commits the batch in plan order exactly
as if it had run the tasks itself. So the run-level rules stay with the one owner:

- ordered commits: the batch commits from the owner, in plan order, in one transaction;
- budgets: reservations are rows checked under the run's lock, so two workers
  reserving for one run see each other's reservations;
- cancellation and deadlines: the owner's watcher cancels its wait; the claims are
  withdrawn (their holders' next write fails, and their heartbeat stops the task);
- approvals: a task that waits for a person reports ``waiting_for_approval`` and the owner
  parks the run as usual.
- the audit chain: a worker writes its claimed task's events to the claim's lane, and
  the owner adopts the lanes into the run's chain when it removes the batch's claims,
  before the batch's commit appends the tasks' transitions (observability/audit_lanes.py).

A batch of one task, every batch on SQLite, and the tasks of a batch that have no effect
(``builtin.assign``, routers, aggregates: a claim would cost more than they do) are
executed by the owner itself, as before. A claim outcome that names artifact bytes this
host cannot read (an artifact root that is not shared) fails the task with
``artifact.not_shared`` rather than recording a ref to bytes nobody can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentctl.digest import canonical_json, digest_json
from agentctl.engine.effects import budget
from agentctl.engine.run.artifacts import IngestedFile
from agentctl.engine.run.outcome import TaskOutcome
from agentctl.errors import AgentctlError, OwnershipLostError
from agentctl.observability import audit_lanes
from agentctl.signals import EffectBlocked
from agentctl.store import task_claims_repo
from agentctl.store.run_queue import Subscription

if TYPE_CHECKING:
    from agentctl.compiler.plan import PlanTask
    from agentctl.engine.run.executor import RunExecutor

__all__ = ["IDLE_SECONDS", "TaskClaims", "outcome_from_json", "outcome_to_json"]

#: The longest a waiting owner goes without reading its batch's claims.
IDLE_SECONDS = 1.0

Runnable = tuple["PlanTask", dict[str, Any], dict[str, Any] | None]


def outcome_to_json(outcome: TaskOutcome) -> dict[str, Any]:
    """A task's outcome as the claim row stores it (everything the owner's commit needs)."""
    return {
        "status": outcome.status,
        "attempt": outcome.attempt,
        "output": outcome.output,
        "hasOutput": outcome.has_output,
        "error": outcome.error,
        "memoryDelta": outcome.memory_delta,
        "stopsRun": outcome.stops_run,
        "approval": outcome.approval,
        "blocked": None
        if outcome.blocked is None
        else {"effectId": outcome.blocked.effect_id, "operation": outcome.blocked.operation},
        "inputDigest": outcome.input_digest,
        "effectIds": list(outcome.effect_ids),
        "artifacts": [
            {"name": a.name, "path": a.path, "named": a.named, "blob": a.blob.to_json()}
            for a in outcome.artifacts
        ],
        "condition": outcome.condition,
    }


def outcome_from_json(data: dict[str, Any]) -> TaskOutcome:
    from agentctl.artifacts.models import IngestedBlob

    blocked = data.get("blocked")
    return TaskOutcome(
        str(data["status"]),
        int(data["attempt"]),
        output=data.get("output"),
        has_output=bool(data.get("hasOutput")),
        error=data.get("error"),
        memory_delta=dict(data.get("memoryDelta") or {}),
        stops_run=bool(data.get("stopsRun")),
        approval=data.get("approval"),
        blocked=None
        if blocked is None
        else EffectBlocked(str(blocked["effectId"]), str(blocked["operation"])),
        input_digest=data.get("inputDigest"),
        effect_ids=[str(e) for e in data.get("effectIds") or []],
        artifacts=[
            IngestedFile(
                str(a["name"]),
                str(a["path"]),
                IngestedBlob(
                    str(a["blob"]["digest"]), int(a["blob"]["size"]), str(a["blob"]["leaseId"])
                ),
                named=bool(a.get("named")),
            )
            for a in data.get("artifacts") or []
        ],
        condition=data.get("condition"),
    )


class TaskClaims:
    """The owner's side, shared by every run one worker drives.

    ``subscribe(payloads)`` returns an event set on the notifications the worker's
    listener hears with one of those payloads, ``unsubscribe`` forgets it.
    """

    def __init__(
        self,
        subscribe: Callable[[frozenset[str] | None], asyncio.Event],
        unsubscribe: Callable[[asyncio.Event], None],
    ) -> None:
        self._subscribe = subscribe
        self._unsubscribe = unsubscribe

    async def run_batch(
        self, executor: RunExecutor, runnable: list[Runnable]
    ) -> dict[str, TaskOutcome]:
        """The batch's outcomes: tasks that reach outside the process are published for
        the workers; those that do not (``builtin.assign``, routers, aggregates, …) are
        computed here meanwhile, as a claim would cost more than they do. The claims are
        removed in the transaction that commits the batch (``commit_with_batch``)."""
        spread = [item for item in runnable if _reaches_out(executor, item[0])]
        local = [item for item in runnable if not _reaches_out(executor, item[0])]
        snapshot = dict(executor.memory)
        remote = asyncio.ensure_future(self._spread(executor, spread) if spread else _nothing())
        handed = False
        try:
            computed = await asyncio.gather(
                *(executor.attempts.run_task(task, tv, snapshot, cond) for task, tv, cond in local)
            )
            outcomes = await remote
            if spread:
                executor.commit_with_batch(_settlement(executor, _ids(spread)))
            handed = True
        finally:
            if not remote.done():
                # Stopped (cancel, deadline, lost run): the claims are withdrawn before the
                # driver records how the run ended.
                remote.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait({remote})
            elif spread and not handed and not remote.cancelled() and not remote.exception():
                # Every claim is done but the batch will not commit (a local task raised):
                # they are removed now, as when the run stops while they run.
                _withdraw(executor, _ids(spread))
        for (task, _, _), outcome in zip(local, computed, strict=True):
            outcomes[task.id] = outcome
        return outcomes

    async def _spread(
        self, executor: RunExecutor, runnable: list[Runnable]
    ) -> dict[str, TaskOutcome]:
        """Publish ``runnable``, wait until every one is done, and return the outcomes."""
        run_id = executor.run_id
        items: list[task_claims_repo.Published] = []
        for task, task_vars, condition in runnable:
            row = executor.rows[task.id]
            payload = {"vars": task_vars, "condition": condition}
            # What the task was decided from: the same basis means the same execution, so
            # an owner that took the run over keeps the outcomes live workers produced.
            basis = digest_json({"payload": payload, "status": row.status, "attempt": row.attempt})
            items.append(task_claims_repo.Published(task.id, basis, canonical_json(payload)))
        task_ids = [item.task_id for item in items]
        # Woken by an outcome of this run's tasks, or its status changing.
        wake = self._subscribe(frozenset({f"done:{run_id}", run_id}))
        try:
            with executor.owned.write() as conn:
                task_claims_repo.publish(conn, run_id, items, executor.clock.now())
            states = await self._wait_done(executor, task_ids, wake)
            return {
                tid: self._checked(executor, outcome_from_json(json.loads(str(states[tid][1]))))
                for tid in task_ids
            }
        except BaseException:
            # Cancelled, deadline, lost ownership: withdraw the claims so their holders stop
            # (their next fenced write fails, their heartbeat cancels the task).
            _withdraw(executor, task_ids)
            raise
        finally:
            self._unsubscribe(wake)

    async def _wait_done(
        self, executor: RunExecutor, task_ids: list[str], wake: asyncio.Event
    ) -> dict[str, tuple[str, str | None]]:
        # Each outcome sends one ``done:RUN`` (a stale claim's sends none). Heard through a
        # Subscription, the owner counts them and reads its claims once it has heard as
        # many as its batch has tasks: counting on every wake-up cost a statement per
        # task. It reads at once on anything else (its run's status, a reconnected
        # listener: what was sent meanwhile is lost), and at least every IDLE_SECONDS.
        outcomes_heard = 0
        look = True
        wake.clear()
        while True:
            if look:
                states = self._look(executor, task_ids)
                if states is not None:
                    return states
            woken = await _woken(wake, IDLE_SECONDS)
            wake.clear()
            if not isinstance(wake, Subscription):
                look = True
                continue
            heard = wake.heard()
            outcomes_heard += sum(1 for payload in heard if payload.startswith("done:"))
            look = (
                not woken
                or outcomes_heard >= len(task_ids)
                or any(not payload.startswith("done:") for payload in heard)
            )

    def _look(
        self, executor: RunExecutor, task_ids: list[str]
    ) -> dict[str, tuple[str, str | None]] | None:
        """The batch's outcomes when every claim is done, None while some are not; raises
        when claims were withdrawn. Counts what is done (one row), and reads the outcomes
        once, when all are (reading every outcome on every look cost the owner and the
        server a batch's worth of rows per task)."""
        with self._batch_read(executor, task_ids) as conn:
            present, done = task_claims_repo.claims_done(conn, executor.run_id, task_ids)
        states: dict[str, tuple[str, str | None]] = {}
        looked = present < len(task_ids) or done == len(task_ids)
        if looked:
            # Read after the count, not in its snapshot: a row seen done stays done
            # until this owner removes it, and one withdrawn since is missing here
            # too, which is what is decided on below.
            with self._batch_read(executor, task_ids) as conn:
                states = task_claims_repo.claim_states(conn, executor.run_id, task_ids)
        missing = [tid for tid in task_ids if tid not in states] if looked else []
        if missing:
            raise OwnershipLostError(
                f"the claims of tasks {', '.join(missing[:5])} of run {executor.run_id} "
                "were withdrawn by another process (the run was taken over)",
                run_id=executor.run_id,
                hint=f"inspect it with `agentctl inspect {executor.run_id}`",
            )
        if states and all(states[tid][0] == "done" for tid in task_ids):
            return states
        return None

    @staticmethod
    def _batch_read(executor: RunExecutor, task_ids: list[str]) -> Any:
        """Where the owner reads its batch's claims: a batch of one ``IN`` list is read in
        one statement without a transaction around it (``Store.read_one``), the read the
        owner makes on every wake-up; a larger one in a read transaction."""
        if len(task_ids) <= task_claims_repo.CHUNK:
            return executor.store.read_one()
        return executor.store.read()

    @staticmethod
    def _checked(executor: RunExecutor, outcome: TaskOutcome) -> TaskOutcome:
        """Refuse artifact bytes another worker wrote where this host cannot read them."""
        if not outcome.artifacts:
            return outcome
        layout = executor.artifacts.artifact_store().layout
        absent = [a for a in outcome.artifacts if not layout.blob_path(a.blob.digest).is_file()]
        if not absent:
            return outcome
        return TaskOutcome(
            "failed",
            outcome.attempt,
            error={
                "code": "artifact.not_shared",
                "message": f"artifact {absent[0].name} ({absent[0].blob.digest}) was written by "
                "another worker into an artifact root this worker cannot read; set "
                "AGENTCTL_ARTIFACT_ROOT to one shared directory on every worker",
            },
            effect_ids=outcome.effect_ids,
        )


async def _woken(wake: asyncio.Event, timeout: float) -> bool:
    """Whether ``wake`` was set within ``timeout`` seconds. The wait runs in the caller's
    task under a timer (``asyncio.timeout``): ``wait_for`` made a task of it, one per
    wake-up, and an owner wakes about once per claimed task (each outcome notifies)."""
    if wake.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await wake.wait()
    except TimeoutError:
        return False
    return True


def _ids(runnable: list[Runnable]) -> list[str]:
    return [task.id for task, _, _ in runnable]


def _settle(conn: Any, run_id: str, task_ids: list[str], now: Any) -> None:
    """Remove a batch's claims and post what they measured; the removal waits for every
    fenced write of their holders that passed, so what they left is all there."""
    task_claims_repo.remove_claims(conn, run_id, task_ids)
    # What the claimed tasks measured of resources without a limit joins the ledger.
    budget.post_pending(conn, run_id, now)


def _settlement(executor: RunExecutor, task_ids: list[str]) -> Callable[[Any], None]:
    """The writes that end a batch's claims once every one is done, for the batch's
    commit: the claims removed, their usage posted, and their audit lanes adopted into
    the chain, before the batch appends the tasks' own transition events (and any lane
    an earlier claim or owner left behind with them)."""

    def write(conn: Any) -> None:
        _settle(conn, executor.run_id, task_ids, executor.clock.now())
        audit_lanes.adopt_lanes(conn, executor.run_id)

    return write


def _withdraw(executor: RunExecutor, task_ids: list[str]) -> None:
    """End a batch's claims apart from any commit of the batch (the run stopped): removed
    so their holders stop, then what they wrote until then adopted, in a write of its own:
    a lane that does not verify must not keep the claims alive."""
    with contextlib.suppress(AgentctlError), executor.owned.write() as conn:
        _settle(conn, executor.run_id, task_ids, executor.clock.now())
    with contextlib.suppress(AgentctlError), executor.owned.write() as conn:
        audit_lanes.adopt_lanes(conn, executor.run_id)


async def _nothing() -> dict[str, TaskOutcome]:
    return {}


def _reaches_out(executor: RunExecutor, task: PlanTask) -> bool:
    """Whether the task may have an effect (an agent, or an action whose kind has one in
    the effect classification; an extension's kind is assumed to)."""
    from agentctl.compiler.effects import ACTION_KINDS

    if task.uses.kind == "agent":
        return True
    if task.uses.kind != "action":
        return False
    action = (executor.spec.get("actions") or {}).get(str(task.uses.name)) or {}
    info = ACTION_KINDS.get(str(action.get("kind")))
    return info is None or info.effect is not None
