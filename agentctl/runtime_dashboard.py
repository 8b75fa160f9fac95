"""The dashboard's door: every read and operation of ``agentctl ui``, over one open store.

:class:`~agentctl.runtime.Runtime` opens the database for each call; the dashboard keeps
one :class:`~agentctl.store.engine.Store` open for its life and reads views of it many
times a second, so its door is this class instead, on the facade's floor. ``agentctl/web``
imports nothing of the store or the engine but through here (docs/architecture.md, "The
door"). Each read is one read transaction, so a dashboard never holds the write lock a
running ``roll`` needs; each operation is the engine operation the CLI calls.

A run's whole plan is decoded once and kept (:meth:`Dashboard.run_view`): its task records
are written once, with the run (agentctl/engine/run/creation.py), and never changed, so a
plan kept under the run's id, creation time and plan header cannot go stale; task states,
events and everything else are read on every request.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agentctl.engine import operations, pauses
from agentctl.engine.actions.result_shapes import result_shape
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunRow, load_run, whole_plan
from agentctl.engine.effects.approvals import Approval, list_approvals
from agentctl.engine.effects.journal import EffectRecord
from agentctl.engine.effects.unsettled import needs_reconciliation
from agentctl.engine.operations import MAX_EVIDENCE_BYTES, ReconcileRequest, inspect_document
from agentctl.engine.run.timing import parked_intervals
from agentctl.errors import NotFoundError
from agentctl.ids import Clock, SystemClock
from agentctl.observability.audit import AuditEvent, events_and_chain
from agentctl.runtime import Runtime
from agentctl.runtime_records import ApprovalDecision, Conclusion
from agentctl.runtime_views import CancelRequest, PausedTask, PauseRelease
from agentctl.store import dashboard_repo
from agentctl.store.adoption import may_adopt
from agentctl.store.dashboard_repo import RunSummary as RunListing
from agentctl.store.engine import Store, open_store
from agentctl.store.location import state_directory
from agentctl.store.ownership import holder_gone

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "TERMINAL_RUN_STATES",
    "ArtifactFile",
    "AuditEvent",
    "Dashboard",
    "GraphView",
    "ReconcileRequest",
    "RunListing",
    "RunRow",
    "RunView",
    "RunsView",
    "Store",
    "TaskProgress",
    "dashboard_log_dir",
    "holder_gone",
    "open_served_store",
    "parked_intervals",
    "result_shape",
]

#: Plans kept decoded (the runs last viewed; a 1,000-task plan is about 1 MB).
PLANS_KEPT = 16


def open_served_store(db: str) -> Store:
    """The store ``agentctl ui`` serves, open until the caller closes it (use it in a
    ``with`` block). A database that does not exist is refused with the error every reading
    command gives (exit 5), never created: the dashboard of a mistyped ``--db`` would be an
    empty database made on the spot."""
    return open_store(db, create=False)


def dashboard_log_dir(db: str) -> Path:
    """Where the dashboard's child ``agentctl resume`` processes write their logs: beside
    the database file (``.agentctl/`` in the working directory for a database URL)."""
    return state_directory(db) / "ui-logs"


@dataclass(frozen=True, slots=True)
class TaskProgress:
    """A task's state and times without its output: what every row of a long run costs."""

    task_id: str
    state: str
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunsView:
    """One page of the runs list (newest first) and every workflow name."""

    runs: list[RunListing]
    workflows: list[str]


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything the run page shows, from one read transaction.

    ``plan_key`` names the plan (equal keys, equal plans), so what is derived from
    ``plan`` may be kept under it. ``document`` is what ``inspect`` reports, its
    ``tasks`` limited to the ones the page chose to detail (in plan order)."""

    row: RunRow
    plan_key: tuple[str, str, str]
    plan: Mapping[str, Any]
    progress: list[TaskProgress]
    document: dict[str, Any]
    events: list[AuditEvent]
    uncertain: list[dict[str, Any]]
    paused: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class GraphView:
    run_id: str
    state: str
    plan_key: tuple[str, str, str]
    plan: Mapping[str, Any]
    states: dict[str, str]


@dataclass(frozen=True, slots=True)
class ArtifactFile:
    path: str
    filename: str
    media_type: str


class Dashboard:
    """The reads and operations of the dashboard over ``store`` (kept open by the caller)."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self._plans: OrderedDict[tuple[str, str, str], Mapping[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def runtime(self) -> Runtime:
        """A :class:`Runtime` over the same database (retry and fork create runs there)."""
        return Runtime(self.store.path, clock=self.clock)

    # -- reads ----------------------------------------------------------------------------

    def runs(
        self,
        *,
        state: str | None,
        workflow: str | None,
        search: str | None,
        limit: int,
        before: tuple[datetime, str] | None,
    ) -> RunsView:
        with self.store.read() as conn:
            rows = dashboard_repo.run_summaries(
                conn, status=state, workflow=workflow, search=search, limit=limit, before=before
            )
            return RunsView(rows, dashboard_repo.workflow_names(conn))

    def run_view(
        self,
        run_id: str,
        detail: Callable[[Mapping[str, Any], list[TaskProgress]], Sequence[str]],
    ) -> RunView:
        """The run page's data; ``detail`` picks, from the plan's tasks and every task's
        progress, the tasks whose outputs, effects and times the page shows."""
        with self.store.read() as conn:
            row = load_run(conn, run_id)
            key, plan = self._plan(conn, row)
            progress = [TaskProgress(*item) for item in dashboard_repo.task_progress(conn, run_id)]
            events, chain = events_and_chain(conn, run_id)
            chosen = list(detail(plan.get("tasks") or {}, progress))
            document = inspect_document(conn, row, events, chain, chosen)
        return RunView(
            row=row,
            plan_key=key,
            plan=plan,
            progress=progress,
            document=document,
            events=events,
            uncertain=needs_reconciliation(self.store, run_id),
            paused=pauses.paused_runs(self.store, run_id),
        )

    def graph_view(self, run_id: str) -> GraphView:
        with self.store.read() as conn:
            row = load_run(conn, run_id)
            key, plan = self._plan(conn, row)
            states = {item[0]: item[1] for item in dashboard_repo.task_progress(conn, run_id)}
        return GraphView(run_id, row.status, key, plan, states)

    def _plan(self, conn: Any, row: RunRow) -> tuple[tuple[str, str, str], Mapping[str, Any]]:
        """The run's whole plan, decoded once (see the module's docstring)."""
        header = json.dumps(row.plan, sort_keys=True, default=str)
        key = (row.id, row.created_at.isoformat(), header)
        with self._lock:
            kept = self._plans.get(key)
            if kept is not None:
                self._plans.move_to_end(key)
                return key, kept
        plan = whole_plan(conn, row.id, row.plan)
        with self._lock:
            self._plans[key] = plan
            while len(self._plans) > PLANS_KEPT:
                self._plans.popitem(last=False)
        return key, plan

    def recorded_source(self, run_id: str) -> RunRow:
        with self.store.read() as conn:
            return load_run(conn, run_id)

    def pending_approvals(self) -> list[tuple[Approval, str]]:
        """Every pending approval and question, oldest first, with its run's workflow."""
        with self.store.read() as conn:
            found = list_approvals(conn, None, status="pending")
            workflows: dict[str, str] = {}
            for item in found:
                if item.run_id not in workflows:
                    workflows[item.run_id] = load_run(conn, item.run_id).workflow_name
        return [(item, workflows[item.run_id]) for item in found]

    def uncertain_effects(self, run_id: str | None = None) -> list[EffectRecord]:
        """Effects whose outcome nobody knows (``agentctl reconcile --list``)."""
        return [EffectRecord.from_json(e) for e in needs_reconciliation(self.store, run_id)]

    def paused(self, run_id: str | None = None) -> list[PausedTask]:
        """Tasks that wait at a pause step, oldest parked first (of one run if given)."""
        return [PausedTask.from_json(p) for p in pauses.paused_runs(self.store, run_id)]

    def change_marker(self) -> str:
        with self.store.read() as conn:
            return dashboard_repo.change_marker(conn)

    def artifact_file(self, run_id: str, digest: str) -> ArtifactFile:
        """The blob of one of the run's artifacts, to download; NotFoundError when the run
        has no such artifact or its blob is gone."""
        from agentctl.artifacts import ArtifactStore

        listing = operations.inspect_run(self.store, run_id)["artifacts"]
        match = next((a for a in listing if a["digest"] == digest), None)
        if match is None:
            raise NotFoundError(
                f"run {run_id} has no artifact with digest {digest}",
                hint="follow a download link from the run's page",
            )
        info = ArtifactStore.beside(self.store, self.clock).inspect(digest)
        if not info.present:
            raise NotFoundError(
                f"the blob of {match['name']} ({digest}) is missing from the artifact store",
                hint="run `agentctl artifacts verify` to see what is damaged",
            )
        filename = Path(str(match.get("path") or match["name"])).name or "artifact"
        return ArtifactFile(info.path, filename, info.media_type or "application/octet-stream")

    def adoptable(self, run_id: str) -> bool:
        """True when nothing the run waits for is left unanswered and no live process owns
        it: a parked run, or one whose executing process died (killed mid-run, it is still
        ``running`` under its dead owner) once every effect it left in doubt is concluded."""
        with self.store.read() as conn:
            run = load_run(conn, run_id)
            pending = len(list_approvals(conn, run_id, status="pending"))
        now = self.clock.now()
        if not may_adopt(run.status, run.owner_id, run.owner_lease_expires_at, pending, now):
            return False
        return not needs_reconciliation(self.store, run_id)

    def child_environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The environment of a child ``agentctl resume`` on this database."""
        return self.store.child_environment(environ)

    # -- operations (the CLI's, with the dashboard's actor) -------------------------------

    def decide(
        self, approval_id: str, *, approve: bool, reason: str, actor: str
    ) -> ApprovalDecision:
        return ApprovalDecision.from_json(
            operations.decide_approval(
                self.store,
                approval_id,
                approve=approve,
                reason=reason,
                actor=actor,
                clock=self.clock,
            )
        )

    def answer(self, approval_id: str, value: str, *, actor: str) -> ApprovalDecision:
        return ApprovalDecision.from_json(
            operations.answer_question(
                self.store, approval_id, value, actor=actor, clock=self.clock
            )
        )

    def reconcile(self, request: ReconcileRequest) -> Conclusion:
        return Conclusion.from_json(
            operations.reconcile_effect(self.store, request, clock=self.clock)
        )

    def cancel(self, run_id: str, reason: str | None, *, actor: str) -> CancelRequest:
        return CancelRequest.from_json(
            operations.cancel_run(self.store, run_id, reason, clock=self.clock, actor=actor)
        )

    def release_pause(self, run_id: str, *, actor: str, reason: str | None) -> PauseRelease:
        return PauseRelease.from_json(
            pauses.release_pause(self.store, run_id, actor=actor, reason=reason, clock=self.clock)
        )
