"""The Python API: :class:`Runtime` runs workflows and operates on their stored runs.

``Runtime(db)`` is what the ``agentctl`` commands do, callable from Python::

    import agentctl

    runtime = agentctl.Runtime("runs.db")
    result = runtime.roll("release.workflow.yaml", inputs={"service": "api"})
    if result.state == "paused":
        (approval,) = result.pending_approvals
        runtime.approve(approval, reason="checked the diff")
        result = runtime.resume(result.run_id)

Every method opens the database, does one thing and closes it again, so a ``Runtime`` is
cheap, holds no connection between calls and may be shared by threads that do not run
workflows at the same time. Errors are the classes of :mod:`agentctl.errors`; each carries
a stable ``code`` (docs/errors.md). The page docs/python-api.md documents every method.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctl.results import Approver, EventSink, RunResult
from agentctl.runtime_admin import AdminOperations
from agentctl.runtime_reading import ReadingOperations
from agentctl.runtime_recovery import RecoveryOperations, RecoveryRequest, optional_path
from agentctl.runtime_scheduling import SchedulingOperations

if TYPE_CHECKING:
    from agentctl.engine.run.creation import PreparedRun
    from agentctl.engine.run.outcome import ExecutionOptions
    from agentctl.ids import Clock
    from agentctl.runtime_records import (
        ApprovalDecision,
        CancelRequest,
        Conclusion,
        RemoteContinuation,
    )
    from agentctl.runtime_views import (
        CompiledWorkflow,
        DoctorReport,
        Explanation,
        ProviderCheck,
        ProviderSmoke,
    )
    from agentctl.store.engine import Store


__all__ = ["EventSink", "RecoveryRequest", "RunResult", "Runtime", "VersionInfo"]


@dataclass(frozen=True, slots=True)
class QueuedRun:
    """A run :meth:`Runtime.submit` created for workers to execute."""

    run_id: str
    workflow: str
    tasks: int


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """What ``agentctl version`` prints: this agentctl's version, the newest schema
    revision and record format it writes, and the Python running it."""

    version: str
    schema_revision: str
    record_format_version: int
    python: str

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "schemaRevision": self.schema_revision,
            "recordFormatVersion": self.record_format_version,
            "python": self.python,
        }


class Runtime(ReadingOperations, RecoveryOperations, AdminOperations, SchedulingOperations):
    """Runs workflows against one SQLite database file.

    ``environ`` is the environment credentials and process secrets resolve from (default:
    ``os.environ`` when a run starts). ``on_event`` hears of progress (see
    :data:`EventSink`). ``approver`` answers approvals in-process instead of parking the
    run: an ``async`` function given the approval request that returns True to approve.
    ``handle_signals`` lets SIGINT/SIGTERM cancel a running workflow (main thread only;
    the CLI sets it). ``clock`` is for tests that drive time.
    """

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        environ: Mapping[str, str] | None = None,
        on_event: EventSink | None = None,
        approver: Approver | None = None,
        handle_signals: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self.db = os.fspath(db)
        self.environ = environ
        self.on_event = on_event
        self.approver = approver
        self.handle_signals = handle_signals
        self._clock = clock

    def __repr__(self) -> str:
        return f"Runtime({self.db!r})"

    @staticmethod
    def locate(db: str | os.PathLike[str] | None = None) -> str:
        """The database every command means by ``--db``: ``db``, else ``$AGENTCTL_DB``,
        else ``.agentctl/runtime.db``; a file path comes back absolute, a URL as given.
        Opens nothing; a URL of an unsupported scheme or a path that cannot be a database
        file raises (:class:`~agentctl.errors.UsageError`)."""
        from agentctl.store.location import resolve_db_path

        return resolve_db_path(db)

    @staticmethod
    def version_info() -> VersionInfo:
        """This agentctl's version, the newest schema revision and record format it
        writes, and the Python running it (``agentctl version``). Opens no database and
        loads no database library."""
        import platform

        from agentctl.store.formats import FORMAT_VERSION
        from agentctl.store.migrate import SCHEMA_HEAD
        from agentctl.version import __version__

        return VersionInfo(__version__, SCHEMA_HEAD, FORMAT_VERSION, platform.python_version())

    # -- workflow files (no database) ---------------------------------------------------

    @staticmethod
    def compile(
        workflow: str | os.PathLike[str],
        *,
        workspace: str | os.PathLike[str] | None = None,
        vars_files: Sequence[str | os.PathLike[str]] = (),
        var_pairs: Sequence[str] = (),
        input_pairs: Sequence[str] = (),
        isolation: bool = False,
    ) -> CompiledWorkflow:
        """Load and compile ``workflow`` with the command-line variable layers, as
        ``agentctl check`` and ``plan`` do: with ``workspace`` its paths are checked there,
        ``input_pairs`` (``KEY=VALUE``) are checked as :meth:`roll` checks them, and
        ``isolation`` also says how each process task would run. An invalid workflow raises
        :class:`~agentctl.errors.ValidationError` with its diagnostics."""
        from agentctl.engine.core.workflow_files import (
            compile_workflow_with_inputs,
            input_readings,
            task_isolation,
        )
        from agentctl.runtime_views import CompiledWorkflow

        path = os.fspath(workflow)
        pairs = list(input_pairs)
        plan, diagnostics, overrides = compile_workflow_with_inputs(
            path,
            optional_path(workspace),
            [os.fspath(f) for f in vars_files],
            list(var_pairs),
            pairs,
        )
        return CompiledWorkflow(
            plan,
            diagnostics,
            overrides,
            input_readings(path, pairs) if overrides else {},
            task_isolation(path, plan) if isolation else {},
        )

    @staticmethod
    def doctor(
        workflow: str | os.PathLike[str], workspace: str | os.PathLike[str] | None = None
    ) -> DoctorReport:
        """Check ``workflow``'s prerequisites without dispatching anything: commands on
        PATH, credentials, endpoints, sandbox runtimes, writable roots."""
        from agentctl.engine.core.doctor import diagnose
        from agentctl.runtime_views import DoctorCheck, DoctorReport

        found = diagnose(os.fspath(workflow), optional_path(workspace))
        checks = [DoctorCheck.from_json(check) for check in found["checks"]]
        return DoctorReport(found["workflow"], checks, found["ok"])

    @staticmethod
    def explain(
        workflow: str | os.PathLike[str],
        *,
        vars_files: Sequence[str | os.PathLike[str]] = (),
        var_pairs: Sequence[str] = (),
        workspace: str | os.PathLike[str] | None = None,
    ) -> Explanation:
        """Each variable of ``workflow`` with its resolved value and where it came from,
        given the command-line layers ``vars_files`` and ``var_pairs``."""
        from agentctl.engine.explain import explain_workflow
        from agentctl.runtime_views import Explanation

        found = explain_workflow(
            os.fspath(workflow),
            vars_files=[os.fspath(f) for f in vars_files],
            var_pairs=var_pairs,
            workspace=optional_path(workspace),
        )
        return Explanation(
            found["workflow"],
            found["workflowDigest"],
            found["planDigest"],
            found["variables"],
            found["tasks"],
            found["diagnostics"],
            found.get("workspace"),
        )

    @staticmethod
    def check_credentials(
        workflow: str | os.PathLike[str], *, smoke: bool = False
    ) -> list[ProviderCheck]:
        """Each provider ``workflow``'s agent tasks reach, with where its credential comes
        from and its SHA-256 (never the value), resolved as a run of it would; with
        ``smoke``, one tiny live request to each. An unresolvable credential or a failed
        request raises :class:`~agentctl.errors.ProviderError`, an endpoint outside
        ``policy.networkAllowlist`` :class:`~agentctl.errors.BlockedError`."""
        from agentctl.engine.core.preflight import check_credentials
        from agentctl.runtime_views import ProviderCheck

        found = check_credentials(os.fspath(workflow), smoke=smoke)
        return [ProviderCheck.from_json(entry) for entry in found]

    @staticmethod
    def smoke_provider(name: str, definition: Mapping[str, Any], *, model: str) -> ProviderSmoke:
        """Send one tiny live request (16 output tokens, 30 seconds at most) to ``model``
        of the provider ``definition`` describes (a ``spec.providers`` entry); a failure
        raises :class:`~agentctl.errors.ProviderError`."""
        import asyncio

        from agentctl.engine.core.preflight import smoke_request
        from agentctl.runtime_views import ProviderSmoke

        agent = {"provider": name, "model": model}
        document = {"spec": {"providers": {name: dict(definition)}, "agents": {"smoke": agent}}}
        answer = asyncio.run(smoke_request(name, document))
        return ProviderSmoke(answer["seconds"], answer["finishReason"])

    # -- running -------------------------------------------------------------------------

    def roll(
        self,
        workflow: str | os.PathLike[str],
        inputs: Mapping[str, Any] | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        check: bool = False,
        dry_run: bool = False,
        diff: bool = False,
        vars_files: Sequence[str | os.PathLike[str]] = (),
        var_pairs: Sequence[str] = (),
        input_pairs: Sequence[str] = (),
    ) -> RunResult:
        """Compile ``workflow``, create a run and execute it; return where it stopped.

        ``vars_files`` and ``var_pairs`` (``KEY=JSON``) are the command-line variable
        layers (docs/variables.md); the values are recorded with the run.

        ``inputs`` override the workflow's declared defaults, and ``input_pairs``
        (``KEY=VALUE``, read as `--input` reads them: text for an input the workflow's
        ``inputSchema`` types as a string, else JSON when it parses) override both.
        ``workspace`` is the base
        for relative paths (default: the workflow file's directory). ``check`` predicts
        (pure work and reads only, nothing kept); ``dry_run`` keeps the state in memory
        and runs in a throwaway copy of the workspace, listing the files it would change
        in ``changed_files`` (with diffs when ``diff``). A failed run is a result with
        ``state == "failed"``, not an exception; invalid workflows and bad inputs raise.
        """
        base = os.fspath(workspace) if workspace is not None else None
        prepared = self._prepare(workflow, inputs, workspace, vars_files, var_pairs, input_pairs)
        return self._roll(
            prepared, workspace=base, timeout=timeout, check=check, dry_run=dry_run, diff=diff
        )

    def submit(
        self,
        workflow: str | os.PathLike[str],
        inputs: Mapping[str, Any] | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        vars_files: Sequence[str | os.PathLike[str]] = (),
        var_pairs: Sequence[str] = (),
        input_pairs: Sequence[str] = (),
    ) -> QueuedRun:
        """Create a run and leave it to ``agentctl worker`` processes (PostgreSQL only);
        follow it with ``agentctl runs wait RUN``. Nothing is executed here."""
        from agentctl.engine.run.creation import create_run
        from agentctl.engine.worker import detach_run, require_postgres
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store
        from agentctl.store.health import require_undamaged

        prepared = self._prepare(workflow, inputs, workspace, vars_files, var_pairs, input_pairs)
        with open_store(self.db) as store:
            require_undamaged(store.path)
            require_postgres(store, "roll --detach")  # before anything is created
            run_id = create_run(store, prepared, clock=self.clock, ids=IdGenerator(self.clock))
            detach_run(store, run_id)
        return QueuedRun(run_id, prepared.plan.workflow_name, len(prepared.plan.order))

    def _prepare(
        self,
        workflow: str | os.PathLike[str],
        inputs: Mapping[str, Any] | None,
        workspace: str | os.PathLike[str] | None,
        vars_files: Sequence[str | os.PathLike[str]],
        var_pairs: Sequence[str],
        input_pairs: Sequence[str] = (),
    ) -> PreparedRun:
        from agentctl.engine.run.creation import prepare_run

        base = os.fspath(workspace) if workspace is not None else None
        return prepare_run(
            os.fspath(workflow),
            inputs=inputs,
            input_pairs=tuple(input_pairs),
            workspace=base,
            vars_files=tuple(os.fspath(f) for f in vars_files),
            var_pairs=tuple(var_pairs),
        )

    def _roll(
        self,
        prepared: PreparedRun,
        *,
        workspace: str | None = None,
        timeout: float | None = None,
        check: bool = False,
        dry_run: bool = False,
        diff: bool = False,
    ) -> RunResult:
        from agentctl.engine.run.creation import create_run
        from agentctl.ids import IdGenerator
        from agentctl.store.engine import open_store
        from agentctl.store.health import require_undamaged
        from agentctl.store.location import MEMORY

        options = self._options(check=check, diff=diff, workspace=workspace)
        clock = self.clock
        with ExitStack() as scope:
            throwaway = None
            if dry_run and not check:
                from agentctl.engine.run.dry_run import ThrowawayWorkspace

                policy = (prepared.workflow.get("spec") or {}).get("policy") or {}
                throwaway = scope.enter_context(
                    ThrowawayWorkspace(prepared.workspace, dict(policy))
                )
                # Writes and processes happen in the copy; the result lists what changed.
                prepared = dataclasses.replace(prepared, workspace=throwaway.copy)
                options.workspace = str(throwaway.copy)
            store = scope.enter_context(open_store(MEMORY if check or dry_run else self.db))
            require_undamaged(store.path)
            run_id = create_run(
                store, prepared, clock=clock, ids=IdGenerator(clock), probe_isolation=not check
            )
            self._notify(
                "created",
                {
                    "runId": run_id,
                    "state": "running",
                    "mode": "execute",
                    "workflow": prepared.plan.workflow_name,
                    "tasks": len(prepared.plan.order),
                },
            )
            result = self._drive(store, run_id, options, timeout)
            if throwaway is not None:
                result = dataclasses.replace(result, changed_files=throwaway.changes(diff=diff))
            return result

    def resume(
        self,
        run_id: str,
        *,
        workspace: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        diff: bool = False,
    ) -> RunResult:
        """Continue a paused or interrupted run from its durable state.

        Confirmed effects are reused, never redone; an effect that started but never
        confirmed becomes uncertain and parks the run until :meth:`reconcile` concludes
        it. A finished run answers with its stored result.
        """
        from agentctl.store.engine import open_store

        base = os.fspath(workspace) if workspace is not None else None
        options = self._options(check=False, diff=diff, workspace=base)
        with open_store(self.db, create=False) as store:
            return self._drive(store, run_id, options, timeout)

    def cancel(self, run_id: str, reason: str | None = None) -> CancelRequest:
        """Ask the process executing ``run_id`` to stop (it ends ``cancelled``); a run no
        process executes is cancelled at once."""
        from agentctl.engine.operations import cancel_run
        from agentctl.runtime_views import CancelRequest
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return CancelRequest.from_json(cancel_run(store, run_id, reason, clock=self.clock))

    # -- deciding ------------------------------------------------------------------------

    def approve(self, approval_id: str, *, reason: str, actor: str = "python") -> ApprovalDecision:
        """Approve a gated effect; :meth:`resume` then dispatches it."""
        return self._decide(approval_id, approve=True, reason=reason, actor=actor)

    def reject(self, approval_id: str, *, reason: str, actor: str = "python") -> ApprovalDecision:
        """Reject a gated effect; on :meth:`resume` its task fails."""
        return self._decide(approval_id, approve=False, reason=reason, actor=actor)

    def answer(self, approval_id: str, value: Any, *, actor: str = "python") -> ApprovalDecision:
        """Answer a question (a ``builtin.ask`` task): ``value`` becomes its output after
        it passes the question's choices or answer schema."""
        from agentctl.engine.operations import answer_question
        from agentctl.runtime_records import ApprovalDecision
        from agentctl.store.engine import open_store

        raw = json.dumps(value)  # answer_question parses JSON: this round-trips any value
        with open_store(self.db, create=False) as store:
            data = answer_question(store, approval_id, raw, actor=actor, clock=self.clock)
        return ApprovalDecision.from_json(data)

    def reconcile(
        self,
        effect_id: str,
        status: str,
        *,
        reason: str,
        actor: str = "python",
        evidence: str | None = None,
        result: Any = None,
        result_schema: Mapping[str, Any] | None = None,
        compensation_effect_id: str | None = None,
        evidence_file: str | os.PathLike[str] | None = None,
        result_file: str | os.PathLike[str] | None = None,
        result_schema_file: str | os.PathLike[str] | None = None,
    ) -> Conclusion:
        """Append a conclusion to an uncertain effect: ``applied``, ``not-applied`` or
        ``compensated``. ``result`` is what an applied operation produced (validated
        against ``result_schema`` when given); ``evidence`` is text kept with it. The
        ``*_file`` forms read the same from files (JSON for the result and schema), as
        ``agentctl reconcile`` does."""
        from agentctl.engine.operations import ReconcileRequest, reconcile_effect
        from agentctl.runtime_records import Conclusion
        from agentctl.store.engine import open_store

        request = ReconcileRequest(
            effect_id=effect_id,
            status=status,
            reason=reason,
            actor=actor,
            evidence=evidence,
            result=result,
            result_schema=dict(result_schema) if result_schema is not None else None,
            compensation_effect_id=compensation_effect_id,
            evidence_file=optional_path(evidence_file),
            result_file=optional_path(result_file),
            result_schema_file=optional_path(result_schema_file),
        )
        with open_store(self.db, create=False) as store:
            return Conclusion.from_json(reconcile_effect(store, request, clock=self.clock))

    def continue_remote(
        self,
        effect_id: str,
        *,
        reason: str,
        actor: str = "python",
        timeout_seconds: float | None = None,
    ) -> RemoteContinuation:
        """Follow the A2A task a delegation's peer returned before its owner died, without
        sending the message again; when the task has finished, conclude the effect
        ``applied`` with the task as its result (then :meth:`resume` the run)."""
        from agentctl.engine.remote_tasks import ContinueRemoteRequest, continue_remote
        from agentctl.runtime_records import RemoteContinuation
        from agentctl.store.engine import open_store

        request = ContinueRemoteRequest(
            effect_id=effect_id,
            reason=reason,
            actor=actor,
            timeout_seconds=timeout_seconds,
            environ=self.environ,
        )
        with open_store(self.db, create=False) as store:
            found = continue_remote(store, request, clock=self.clock)
        return RemoteContinuation.from_json(found)

    # -- internals -----------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        if self._clock is None:
            from agentctl.ids import SystemClock

            self._clock = SystemClock()
        return self._clock

    def _decide(
        self, approval_id: str, *, approve: bool, reason: str, actor: str
    ) -> ApprovalDecision:
        from agentctl.engine.operations import decide_approval
        from agentctl.runtime_records import ApprovalDecision
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            data = decide_approval(
                store, approval_id, approve=approve, reason=reason, actor=actor, clock=self.clock
            )
        return ApprovalDecision.from_json(data)

    def _options(self, *, check: bool, diff: bool, workspace: str | None) -> ExecutionOptions:
        from agentctl.engine.run.outcome import ExecutionOptions

        options = ExecutionOptions(
            check=check,
            diff=diff,
            approver=self.approver,
            events=self.on_event,
            workspace=workspace,
        )
        if self.environ is not None:
            options.environ = dict(self.environ)
        return options

    def _notify(self, kind: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, data)

    def _drive(
        self, store: Store, run_id: str, options: ExecutionOptions, timeout: float | None
    ) -> RunResult:
        from agentctl.engine.driving import auto_compensate, drive_run

        outcome = drive_run(
            store,
            run_id,
            options,
            clock=self.clock,
            timeout=timeout,
            handle_signals=self.handle_signals,
        )
        compensated = auto_compensate(
            store,
            outcome,
            options,
            clock=self.clock,
            timeout=timeout,
            handle_signals=self.handle_signals,
            notify=self.on_event,
        )
        compensation = RunResult.from_outcome(compensated) if compensated is not None else None
        return RunResult.from_outcome(outcome, compensation=compensation)
