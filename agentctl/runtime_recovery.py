"""The recovery half of :class:`agentctl.Runtime`: plan, create and execute the retry,
repair, fork, compensation and replay of a finished run (docs/durable-execution.md,
docs/python-api.md). :class:`agentctl.Runtime` inherits these methods; this module is
internal, import the facade.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentctl.results import EventSink, RunResult

if TYPE_CHECKING:
    from agentctl.engine.driving import RecoveryRequest
    from agentctl.engine.recovery.planner import RecoveryPlan
    from agentctl.engine.run.outcome import ExecutionOptions
    from agentctl.ids import Clock

__all__ = ["RecoveryOperations", "optional_path", "recovery_request"]


class RecoveryOperations:
    """Retry, repair, fork, compensate and replay; the state they use (``db``, ``clock``,
    the execution options and the event sink) is the facade's."""

    db: str
    handle_signals: bool
    on_event: EventSink | None

    if TYPE_CHECKING:
        # Declared for the type checker only: Runtime defines these, so the mixin has no
        # placeholder body that a call could ever reach.
        @property
        def clock(self) -> Clock: ...

        def _options(
            self, *, check: bool, diff: bool, workspace: str | None
        ) -> ExecutionOptions: ...

        def _notify(self, kind: str, data: dict[str, Any]) -> None: ...

    # -- recovery ------------------------------------------------------------------------

    def plan_retry(
        self,
        workflow: str | os.PathLike[str],
        source_run_id: str,
        *,
        failed: bool = False,
        from_tasks: Sequence[str] = (),
        restart_successful: bool = False,
        workspace: str | os.PathLike[str] | None = None,
    ) -> dict[str, Any]:
        """What :meth:`retry` would reuse, execute or find blocked, per task; creates nothing."""
        request = recovery_request("retry", source_run_id, workflow, workspace, failed, from_tasks)
        return self._plan(dataclasses.replace(request, restart_successful=restart_successful))

    def retry(
        self,
        workflow: str | os.PathLike[str],
        source_run_id: str,
        *,
        failed: bool = False,
        from_tasks: Sequence[str] = (),
        restart_successful: bool = False,
        reason: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """``agentctl retry``: rerun a finished run of the identical workflow, reusing every
        successful boundary; the failed tasks (``failed``) or ``from_tasks`` and their
        descendants run with fresh attempts."""
        request = recovery_request("retry", source_run_id, workflow, workspace, failed, from_tasks)
        request = dataclasses.replace(request, restart_successful=restart_successful)
        return self._recover(request, reason=reason, timeout=timeout)

    def plan_repair(
        self,
        workflow: str | os.PathLike[str],
        source_run_id: str,
        *,
        from_tasks: Sequence[str] = (),
        restart_successful: bool = False,
        workspace: str | os.PathLike[str] | None = None,
        vars_files: Sequence[str] = (),
        var_pairs: Sequence[str] = (),
    ) -> dict[str, Any]:
        """What :meth:`repair` would reuse, execute or find blocked; creates nothing."""
        request = recovery_request("repair", source_run_id, workflow, workspace, False, from_tasks)
        return self._plan(
            dataclasses.replace(
                request,
                restart_successful=restart_successful,
                vars_files=tuple(vars_files),
                var_pairs=tuple(var_pairs),
            )
        )

    def repair(
        self,
        workflow: str | os.PathLike[str],
        source_run_id: str,
        *,
        from_tasks: Sequence[str] = (),
        restart_successful: bool = False,
        reason: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        vars_files: Sequence[str] = (),
        var_pairs: Sequence[str] = (),
    ) -> RunResult:
        """``agentctl repair``: run a changed workflow, reusing the source's results that
        are still compatible. Variables given here replace the ones the source recorded."""
        request = recovery_request("repair", source_run_id, workflow, workspace, False, from_tasks)
        request = dataclasses.replace(
            request,
            restart_successful=restart_successful,
            vars_files=tuple(vars_files),
            var_pairs=tuple(var_pairs),
        )
        return self._recover(request, reason=reason, timeout=timeout)

    def plan_fork(self, source_run_id: str) -> dict[str, Any]:
        """The plan of :meth:`fork`: every task executes."""
        return self._plan(recovery_request("fork", source_run_id))

    def fork(
        self,
        source_run_id: str,
        *,
        reason: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """``agentctl fork``: a new linked run of the stored workflow that runs every effect."""
        request = recovery_request("fork", source_run_id, workspace=workspace)
        return self._recover(request, reason=reason, timeout=timeout)

    def create_retry(
        self,
        workflow: str | os.PathLike[str],
        source_run_id: str,
        *,
        failed: bool = False,
        from_tasks: Sequence[str] = (),
        restart_successful: bool = False,
        reason: str | None = None,
        actor: str = "python",
        workspace: str | os.PathLike[str] | None = None,
    ) -> str:
        """The first half of :meth:`retry`: plan and create the retry run (reused results
        copied in, ``actor`` and ``reason`` recorded in its ``run.created`` event) without
        executing it; returns its id. :meth:`resume` (or ``agentctl resume RUN`` in
        another process, as the dashboard does) executes it."""
        request = recovery_request("retry", source_run_id, workflow, workspace, failed, from_tasks)
        request = dataclasses.replace(request, restart_successful=restart_successful)
        return self._derive(request, reason=reason, actor=actor)[0]

    def create_fork(
        self,
        source_run_id: str,
        *,
        reason: str | None = None,
        actor: str = "python",
        workspace: str | os.PathLike[str] | None = None,
    ) -> str:
        """The first half of :meth:`fork`: create the fork run without executing it."""
        request = recovery_request("fork", source_run_id, workspace=workspace)
        return self._derive(request, reason=reason, actor=actor)[0]

    def plan_compensation(
        self, source_run_id: str, *, tasks: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """Which confirmed mutations :meth:`compensate` would undo (``steps``), and whether
        anything blocks it (``complete``); creates nothing."""
        from agentctl.engine.recovery.compensation import plan_compensation
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return plan_compensation(store, source_run_id, only=list(tasks or []) or None).to_json()

    def compensate(
        self,
        source_run_id: str,
        *,
        tasks: Sequence[str] | None = None,
        workspace: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
    ) -> RunResult | None:
        """``agentctl compensate``: undo a finished run's confirmed mutations with their
        declared inverses, in a new linked run; None when there is nothing to undo."""
        from agentctl.engine.driving import drive_run
        from agentctl.engine.recovery.compensation import create_compensation_run, plan_compensation
        from agentctl.engine.run.creation import derived_workspace
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store

        options = self._options(check=False, diff=False, workspace=optional_path(workspace))
        with open_store(self.db, create=False) as store:
            plan = plan_compensation(store, source_run_id, only=list(tasks or []) or None)
            ids = IdGenerator(self.clock)
            run_id = create_compensation_run(
                store,
                plan,
                clock=self.clock,
                ids=ids,
                workspace=derived_workspace(store, source_run_id, optional_path(workspace)),
            )
            if run_id is None:
                return None
            self._notify(
                "created",
                {
                    "runId": run_id,
                    "state": "running",
                    "mode": "compensate",
                    "sourceRunId": source_run_id,
                    "tasks": len(plan.runnable),
                },
            )
            outcome = drive_run(
                store,
                run_id,
                options,
                clock=self.clock,
                timeout=timeout,
                handle_signals=self.handle_signals,
            )
        return RunResult.from_outcome(outcome)

    def replay(self, source_run_id: str) -> RunResult:
        """``agentctl replay``: rebuild a finished run from its records into a new run; no
        provider, tool or process is called."""
        from agentctl.engine.recovery.planner import replay_run
        from agentctl.engine.run.outcome import finished_outcome
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            ids = IdGenerator(self.clock)
            run_id = replay_run(store, source_run_id, clock=self.clock, ids=ids)
            outcome = finished_outcome(store, run_id)
        assert outcome is not None, "a replay is finished when it is created"
        return RunResult.from_outcome(outcome)

    def analyze_run(self, run_id: str) -> dict[str, Any]:
        """``agentctl runs analyze``: which tasks of a run an older release recorded can be
        given this release's reuse metadata, proven from the stored records (and why not,
        task by task); writes nothing."""
        from agentctl.engine.recovery.legacy_upgrade import analyze_run
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return analyze_run(store, run_id).to_json()

    def upgrade_run(
        self, run_id: str, *, dry_run: bool = False, actor: str = "python"
    ) -> dict[str, Any]:
        """``agentctl runs upgrade``: persist exactly what :meth:`analyze_run` proves (one
        conditional update per task, audited); ``dry_run`` changes nothing."""
        from agentctl.engine.recovery.legacy_upgrade import upgrade_run
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return upgrade_run(
                store,
                run_id,
                clock=self.clock,
                ids=IdGenerator(self.clock),
                dry_run=dry_run,
                actor=actor,
            )

    def _plan(self, request: RecoveryRequest) -> dict[str, Any]:
        from agentctl.engine.driving import recovery_plan
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return recovery_plan(store, request).to_json()

    def _derive(
        self, request: RecoveryRequest, *, reason: str | None, actor: str | None
    ) -> tuple[str, RecoveryPlan]:
        """Plan a retry, repair or fork and create its run (nothing executes here)."""
        from agentctl.engine.driving import recovery_plan
        from agentctl.engine.recovery.planner import create_derived_run
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            plan = recovery_plan(store, request)
            ids = IdGenerator(self.clock)
            run_id = create_derived_run(
                store, plan, clock=self.clock, ids=ids, reason=reason, actor=actor
            )
        return run_id, plan

    def _recover(
        self, request: RecoveryRequest, *, reason: str | None, timeout: float | None
    ) -> RunResult:
        from agentctl.engine.driving import drive_run
        from agentctl.store.engine import open_store

        options = self._options(check=False, diff=False, workspace=request.workspace)
        run_id, plan = self._derive(request, reason=reason, actor=None)
        self._notify(
            "created",
            {
                "runId": run_id,
                "state": "running",
                "mode": plan.mode,
                "sourceRunId": request.source_run_id,
                "workflow": plan.prepared.plan.workflow_name,
                "tasks": len(plan.decisions),
                "reused": sum(1 for d in plan.decisions if d.action == "reuse"),
            },
        )
        with open_store(self.db, create=False) as store:
            outcome = drive_run(
                store,
                run_id,
                options,
                clock=self.clock,
                timeout=timeout,
                handle_signals=self.handle_signals,
            )
        return RunResult.from_outcome(outcome)


def recovery_request(
    mode: str,
    source_run_id: str,
    workflow: str | os.PathLike[str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    failed: bool = False,
    from_tasks: Sequence[str] = (),
) -> RecoveryRequest:
    from agentctl.engine.driving import RecoveryRequest

    return RecoveryRequest(
        mode=mode,
        source_run_id=source_run_id,
        workflow=optional_path(workflow),
        workspace=optional_path(workspace),
        failed=failed,
        from_tasks=tuple(from_tasks),
    )


def optional_path(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)
