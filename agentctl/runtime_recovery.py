"""The recovery half of :class:`agentctl.Runtime`: plan, create and execute the retry,
repair, fork, compensation and replay of a finished run (docs/durable-execution.md,
docs/python-api.md). A :class:`RecoveryRequest` says what is asked;
``Runtime.plan(request)`` shows what would happen and ``Runtime.recover(request)`` does it.
:class:`agentctl.Runtime` inherits these methods; this module is internal, import the
facade (``agentctl.RecoveryRequest``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentctl.results import EventSink, RunResult

if TYPE_CHECKING:
    from agentctl.engine.driving import RecoveryRequest as EngineRequest
    from agentctl.engine.recovery.compensation import CompensationPlan
    from agentctl.engine.recovery.legacy_upgrade import LegacyRunUpgrade, LegacyRunUpgradeAnalysis
    from agentctl.engine.recovery.planner import RecoveryPlan
    from agentctl.engine.run.outcome import ExecutionOptions
    from agentctl.ids import Clock

__all__ = ["RecoveryMode", "RecoveryOperations", "RecoveryRequest", "optional_path"]

RecoveryMode = Literal["retry", "repair", "fork", "compensate", "replay"]
_MODES = ("retry", "repair", "fork", "compensate", "replay")


@dataclass(frozen=True, slots=True)
class RecoveryRequest:
    """What to derive from the finished run ``source_run_id`` (docs/python-api.md):

    - ``retry``: rerun ``workflow`` (identical to the source's) reusing every successful
      boundary; the failed tasks (``failed``) or ``from_tasks`` and their descendants run
      with fresh attempts (``restart_successful`` also reruns succeeded tasks among them);
    - ``repair``: run a changed ``workflow``, reusing the results still compatible;
      ``vars_files``/``var_pairs`` replace the variables the source recorded;
    - ``fork``: a new linked run of the stored workflow that runs every effect;
    - ``compensate``: undo the confirmed mutations with their declared inverses (only the
      tasks named in ``tasks`` when given);
    - ``replay``: rebuild the run from its records; nothing is called.

    ``workspace`` replaces the source run's recorded workspace; ``reason`` and ``actor``
    are recorded in the new run's ``run.created`` event.
    """

    mode: RecoveryMode
    source_run_id: str
    workflow: str | os.PathLike[str] | None = None
    failed: bool = False
    from_tasks: Sequence[str] = ()
    restart_successful: bool = False
    tasks: Sequence[str] = ()
    workspace: str | os.PathLike[str] | None = None
    vars_files: Sequence[str | os.PathLike[str]] = ()
    var_pairs: Sequence[str] = ()
    reason: str | None = None
    actor: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            from agentctl.errors import UsageError

            raise UsageError(
                f"unknown recovery mode {self.mode!r}",
                hint="use one of: " + ", ".join(_MODES),
            )

    @property
    def only(self) -> list[str] | None:
        """The tasks a compensation is limited to (None: every one)."""
        return list(self.tasks) or None

    def engine_request(self) -> EngineRequest:
        """The engine's form of a retry, repair or fork (paths as strings)."""
        from agentctl.engine.driving import RecoveryRequest as EngineRequest

        return EngineRequest(
            mode=self.mode,
            source_run_id=self.source_run_id,
            workflow=optional_path(self.workflow),
            workspace=optional_path(self.workspace),
            failed=self.failed,
            from_tasks=tuple(self.from_tasks),
            restart_successful=self.restart_successful,
            vars_files=tuple(os.fspath(f) for f in self.vars_files),
            var_pairs=tuple(self.var_pairs),
        )


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

    def plan(self, request: RecoveryRequest) -> RecoveryPlan | CompensationPlan:
        """What :meth:`recover` would do with ``request``, creating nothing: for a retry,
        repair or fork a :class:`RecoveryPlan` (per task: reuse, execute or blocked), for a
        compensation a :class:`CompensationPlan` (the inverse steps, and whether anything
        blocks them). Both have ``to_json()``, the document ``--plan`` prints."""
        if request.mode == "compensate":
            from agentctl.engine.recovery.compensation import plan_compensation
            from agentctl.store.engine import open_store

            with open_store(self.db, create=False) as store:
                return plan_compensation(store, request.source_run_id, only=request.only)
        if request.mode == "replay":
            from agentctl.errors import UsageError

            raise UsageError(
                f"a replay of {request.source_run_id} has no plan: it rebuilds every task "
                "from the run's records and calls nothing",
                hint=f"run it with `agentctl replay {request.source_run_id}`",
            )
        from agentctl.engine.driving import recovery_plan
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return recovery_plan(store, request.engine_request())

    def recover(
        self, request: RecoveryRequest, *, timeout: float | None = None
    ) -> RunResult | None:
        """Create the run ``request`` asks for and execute it: ``agentctl retry``,
        ``repair``, ``fork``, ``compensate`` and ``replay``. Returns where the new run
        stopped; None only for a compensation with nothing to undo. A blocked plan raises
        :class:`~agentctl.errors.BlockedError` (exit 3) and creates nothing."""
        if request.mode == "compensate":
            return self._compensate(request, timeout)
        if request.mode == "replay":
            return self._replay(request.source_run_id)
        return self._recover(request, timeout=timeout)

    def create(self, request: RecoveryRequest) -> str:
        """The first half of :meth:`recover` for a retry, repair or fork: plan and create
        the run (reused results copied in, ``request.actor`` and ``request.reason``
        recorded in its ``run.created`` event) without executing it; returns its id.
        :meth:`resume` (or ``agentctl resume RUN`` in another process, as the dashboard
        does) executes it."""
        if request.mode not in ("retry", "repair", "fork"):
            from agentctl.errors import UsageError

            raise UsageError(
                f"only a retry, repair or fork is created without executing it, not a "
                f"{request.mode}",
                hint="call Runtime.recover(request) instead",
            )
        return self._derive(request.engine_request(), reason=request.reason, actor=request.actor)[0]

    def _compensate(self, request: RecoveryRequest, timeout: float | None) -> RunResult | None:
        from agentctl.engine.driving import drive_run
        from agentctl.engine.recovery.compensation import create_compensation_run, plan_compensation
        from agentctl.engine.run.creation import derived_workspace
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store

        source_run_id, workspace = request.source_run_id, optional_path(request.workspace)
        options = self._options(check=False, diff=False, workspace=workspace)
        with open_store(self.db, create=False) as store:
            plan = plan_compensation(store, source_run_id, only=request.only)
            ids = IdGenerator(self.clock)
            run_id = create_compensation_run(
                store,
                plan,
                clock=self.clock,
                ids=ids,
                workspace=derived_workspace(store, source_run_id, workspace),
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

    def _replay(self, source_run_id: str) -> RunResult:
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

    def analyze_run(self, run_id: str) -> LegacyRunUpgradeAnalysis:
        """``agentctl runs analyze``: which tasks of a run an older release recorded can be
        given this release's reuse metadata, proven from the stored records (and why not,
        task by task); writes nothing."""
        from agentctl.engine.recovery.legacy_upgrade import analyze_run
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return analyze_run(store, run_id)

    def upgrade_run(
        self, run_id: str, *, dry_run: bool = False, actor: str = "python"
    ) -> LegacyRunUpgrade:
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

    def _derive(
        self, request: EngineRequest, *, reason: str | None, actor: str | None
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

    def _recover(self, request: RecoveryRequest, *, timeout: float | None) -> RunResult:
        from agentctl.engine.driving import drive_run
        from agentctl.store.engine import open_store

        wanted = request.engine_request()
        options = self._options(check=False, diff=False, workspace=wanted.workspace)
        run_id, plan = self._derive(wanted, reason=request.reason, actor=request.actor)
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


def optional_path(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)
