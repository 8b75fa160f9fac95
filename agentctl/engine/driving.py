"""Driving a stored run to its next stop, and the automatic compensation that may follow.

Both the Python facade (:mod:`agentctl.runtime`) and the CLI drive runs through here, so
"execute a run" means one thing: answer a finished run from its record, refuse a database
known to be damaged, run the executor (optionally under SIGINT/SIGTERM and a timeout, both
of which cancel it), and checkpoint the WAL once the run parks or ends.

``spec.compensation.onFailure: automatic`` is engine policy and lives here too: right
after a run fails, its confirmed mutations are undone in a new linked compensation run
(docs/durable-execution.md). Recovery runs (retry, repair, fork) are planned here for the
facade too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctl.engine.run.outcome import ExecutionOptions, RunOutcome, finished_outcome
from agentctl.errors import AgentctlError, Cancelled, UsageError
from agentctl.ids import Clock
from agentctl.store.engine import Store

if TYPE_CHECKING:
    from agentctl.engine.recovery.planner import RecoveryPlan

__all__ = ["RecoveryRequest", "auto_compensate", "drive_run", "recovery_plan"]

Notify = Callable[[str, dict[str, Any]], None]


def drive_run(
    store: Store,
    run_id: str,
    options: ExecutionOptions,
    *,
    clock: Clock,
    timeout: float | None = None,
    handle_signals: bool = False,
) -> RunOutcome:
    """Execute ``run_id`` until it succeeds, fails, parks or is cancelled.

    With ``handle_signals`` SIGINT and SIGTERM cancel the run (only the main thread may
    install handlers: the CLI sets it). ``timeout`` cancels after that many seconds; the
    run then ends ``cancelled`` and :class:`~agentctl.errors.Cancelled` is raised.
    """
    from agentctl.engine.next_steps import for_run, render
    from agentctl.engine.run.executor import RunExecutor
    from agentctl.store.health import checkpoint_wal, require_undamaged

    finished = finished_outcome(store, run_id)
    if finished is not None:
        return finished
    require_undamaged(store.path)

    async def main() -> RunOutcome:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, task.cancel, f"interrupted by {sig.name}")
        # The message a cancelled task carries becomes the run's recorded reason, so a
        # timeout says it timed out.
        timer = (
            None
            if timeout is None
            else loop.call_later(
                timeout, task.cancel, f"timed out after {timeout:g}s (--timeout-seconds)"
            )
        )
        try:
            executor = RunExecutor(store, run_id, clock=clock, options=options)
            return await executor.execute()
        except asyncio.CancelledError as stop:  # stopped before the executor took over
            raise Cancelled(next(iter(stop.args), None) or "interrupted", run_id=run_id) from None
        finally:
            if timer is not None:
                timer.cancel()
            for sig in signals:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(main())
    except Cancelled as cancelled:
        if cancelled.hint is None and cancelled.run_id and not store.in_memory:
            # The suggestions must never hide the cancellation itself.
            with contextlib.suppress(AgentctlError):
                cancelled.hint = render(for_run(store, cancelled.run_id))
        raise
    finally:
        # A parked or finished run is in the main file, not only in the WAL: an operator
        # who copies the database file alone keeps every confirmed state.
        checkpoint_wal(store)


def auto_compensate(
    store: Store,
    outcome: RunOutcome,
    options: ExecutionOptions,
    *,
    clock: Clock,
    timeout: float | None = None,
    handle_signals: bool = False,
    notify: Notify | None = None,
) -> RunOutcome | None:
    """``spec.compensation.onFailure: automatic``: compensate right after a failed run.

    Returns the compensation run's outcome, or None when the run did not fail, is itself a
    compensation, does not ask for automatic compensation, or has nothing to undo.
    ``notify("created", …)`` hears of the compensation run before it executes.
    """
    if outcome.state != "failed":
        return None
    from agentctl.engine.core.records import load_run
    from agentctl.engine.recovery.compensation import compensate_automatically

    with store.read() as conn:
        run = load_run(conn, outcome.run_id)
    compensation_id = compensate_automatically(store, run, clock=clock)
    if compensation_id is None:
        return None
    if notify is not None:
        notify(
            "created",
            {
                "runId": compensation_id,
                "state": "running",
                "mode": "compensate",
                "automatic": True,
                "sourceRunId": run.id,
                "workflow": run.workflow_name,
            },
        )
    return drive_run(
        store, compensation_id, options, clock=clock, timeout=timeout, handle_signals=handle_signals
    )


@dataclass(frozen=True, slots=True)
class RecoveryRequest:
    """What a ``retry``, ``repair`` or ``fork`` is asked to do (the facade and the CLI
    build one; :func:`recovery_plan` is the one place that turns it into a plan)."""

    mode: str  # retry | repair | fork
    source_run_id: str
    workflow: str | None = None
    workspace: str | None = None
    failed: bool = False
    from_tasks: tuple[str, ...] = ()
    restart_successful: bool = False
    vars_files: tuple[str, ...] = ()
    var_pairs: tuple[str, ...] = ()


def recovery_plan(store: Store, request: RecoveryRequest) -> RecoveryPlan:
    """Plan a ``retry``, ``repair`` (of ``request.workflow``) or ``fork`` of a finished run.

    Variables given on the command line (``vars_files``, ``var_pairs``) replace the ones
    the source run recorded, which is allowed for ``repair`` only: a retry must compile
    the identical workflow, so it always uses the recorded values."""
    from agentctl.engine.recovery import planner as recovery
    from agentctl.engine.run.creation import derived_workspace, prepare_run, recorded_variables

    mode, source_run_id = request.mode, request.source_run_id
    # The source run's recorded workspace unless --workspace says otherwise: a retry of a
    # run rolled with --workspace works in that workspace again.
    workspace = derived_workspace(store, source_run_id, request.workspace)
    if mode == "fork":
        plan = recovery.plan_fork(store, source_run_id)
        if workspace is None:
            return plan
        return dataclasses.replace(
            plan, prepared=dataclasses.replace(plan.prepared, workspace=workspace)
        )
    if request.workflow is None:
        raise UsageError(f"{mode} needs the workflow file")
    given = bool(request.vars_files or request.var_pairs)
    if given and mode != "repair":
        raise UsageError(
            f"{mode} uses the variables run {source_run_id} was created with",
            hint="change variables with `agentctl repair WORKFLOW RUN --var KEY=JSON`",
        )
    prepared = prepare_run(
        request.workflow,
        workspace=None if workspace is None else str(workspace),
        vars_files=request.vars_files,
        var_pairs=request.var_pairs,
        recorded_variables=None if given else recorded_variables(store, source_run_id),
        recorded_from=source_run_id,
    )
    if mode == "retry":
        return recovery.plan_retry(
            store,
            source_run_id,
            prepared,
            failed=request.failed,
            from_tasks=list(request.from_tasks),
            restart_successful=request.restart_successful,
        )
    return recovery.plan_repair(
        store,
        source_run_id,
        prepared,
        from_tasks=list(request.from_tasks),
        restart_successful=request.restart_successful,
    )
