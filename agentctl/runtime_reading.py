"""The reading half of :class:`agentctl.Runtime`: a stored run and what surrounds it (its
tasks, effects, approvals, audit trail, provider sessions, plan and next steps), and runs
listed. :class:`agentctl.Runtime` inherits these methods; this module is internal, use the
facade.

Each method opens the store, calls one engine read and closes it again, like the rest of
the facade; the records it returns are the documents the matching command prints with
``--output json`` (``to_json()``).
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentctl.runtime_records import (
        Approval,
        AuditLog,
        EffectDetail,
        EffectRecord,
        NextStep,
        RunLook,
        RunRecap,
        RunReport,
        RunSummary,
        SessionDetail,
        SessionSummary,
        StoredPlan,
        TracedEffect,
    )

__all__ = ["ReadingOperations"]


class ReadingOperations:
    """The reads of stored runs; the state they use (``db``) is the facade's."""

    db: str

    # -- reading -------------------------------------------------------------------------

    def inspect(self, run_id: str) -> RunReport:
        """The whole stored run: tasks, effects and their reconciliations, approvals,
        budget, provider sessions, tool calls, artifacts, retries and the audit check."""
        from agentctl.engine.operations import inspect_run
        from agentctl.runtime_records import RunReport
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return RunReport.from_json(inspect_run(store, run_id))

    def runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        since: datetime | None = None,
        schedule: str | None = None,
    ) -> list[RunSummary]:
        """Runs, newest first, optionally only those in ``status``, of ``workflow``,
        created at or after ``since``, or started by the schedule named ``schedule``."""
        from agentctl.engine.run_listing import list_runs
        from agentctl.runtime_views import RunSummary
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = list_runs(
                store,
                status=status,
                workflow=workflow,
                limit=limit,
                since=since,
                schedule=schedule,
            )
        return [RunSummary.from_json(run) for run in found]

    def follow(self, run_id: str, *, interval: float = 0.5) -> Generator[RunLook, None, None]:
        """Look at ``run_id`` now and then every ``interval`` seconds, each look with the
        audit events since the previous one (``agentctl watch``); the caller stops when it
        has seen enough (a finished or parked run is not looked at again unless asked).
        The database stays open while the looks are read and closes when they stop."""
        import time

        from agentctl.engine.watching import look
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            seq = 0
            while True:
                now = look(store, run_id, after_seq=seq)
                seq = now.last_seq
                yield now
                time.sleep(interval)

    def audit(self, run_id: str, *, verify: bool = False) -> AuditLog:
        """A run's audit events and the check of their hash chain. With ``verify`` a
        broken chain raises :class:`~agentctl.errors.PersistenceError` (``audit.broken``)."""
        from agentctl.engine.operations import audit_trail
        from agentctl.runtime_records import AuditLog
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            chain, events = audit_trail(store, run_id, verify=verify)
        return AuditLog(run_id, events, chain)

    def sessions(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SessionSummary]:
        """Recorded provider sessions, newest first, of one run or saved under ``name``."""
        from agentctl.engine.actions.sessions import list_sessions
        from agentctl.runtime_views import SessionSummary
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = list_sessions(store, run_id=run_id, name=name)
        return [SessionSummary.from_json(session) for session in found]

    def session(self, run_id: str, task_id: str) -> SessionDetail:
        """One provider session with its transcript."""
        from agentctl.engine.actions.sessions import show_session
        from agentctl.runtime_views import SessionDetail
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return SessionDetail.from_json(show_session(store, run_id, task_id))

    def next_steps(self, run_id: str) -> list[NextStep]:
        """The commands that move ``run_id`` on from where it is now (docs/cli.md)."""
        from agentctl.engine.next_steps import for_run
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            return for_run(store, run_id)

    def recap(self, run_id: str) -> RunRecap:
        """Where ``run_id`` stands, as ``roll`` and ``resume`` report it once it stops: its
        ``totals`` (state, time taken, tasks, effects, tokens and cost; ``text()`` is the
        line they print) and the commands that move it on (``next``), read in one go."""
        from agentctl.engine.next_steps import for_run
        from agentctl.engine.summary import run_summary
        from agentctl.runtime_records import RunRecap, RunTotals
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            totals = RunTotals.from_json(run_summary(store, run_id))
            return RunRecap(totals, for_run(store, run_id))

    def plan_of(self, run_id: str) -> StoredPlan:
        """The compiled plan ``run_id`` executes, with each task's state."""
        from agentctl.compiler import Plan
        from agentctl.engine.operations import stored_plan
        from agentctl.runtime_records import StoredPlan
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            run, states = stored_plan(store, run_id)
        return StoredPlan(run_id, Plan.from_json(run.plan), states)

    def effects(self, run_id: str, *, task: str | None = None) -> list[TracedEffect]:
        """A run's journaled effects (of one task, when given) in the order they were
        requested, each with the ids of its telemetry span."""
        from agentctl.engine.operations import traced_effects
        from agentctl.runtime_records import TracedEffect
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = traced_effects(store, run_id, task)
        return [TracedEffect(effect, *(span or (None, None))) for effect, span in found]

    def approvals(
        self, run_id: str | None = None, *, include_resolved: bool = False
    ) -> list[Approval]:
        """Pending approvals and questions (of one run, or of all), oldest first."""
        from agentctl.engine.core.records import load_run
        from agentctl.engine.effects.approvals import list_approvals
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store, store.read() as conn:
            if run_id is not None:
                load_run(conn, run_id)
            status = None if include_resolved else "pending"
            return list_approvals(conn, run_id, status=status)

    def effect(self, effect_id: str) -> EffectDetail:
        """One journaled effect (id or a unique prefix) with its reconciliations and the
        remote task its peer returned, if any (``effects continue-remote``)."""
        from agentctl.engine.effects.journal import (
            list_reconciliations,
            remote_task,
            require_effect,
        )
        from agentctl.runtime_records import EffectDetail
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store, store.read() as conn:
            record = require_effect(conn, effect_id)
            return EffectDetail(
                record, list_reconciliations(conn, record.id), remote_task(conn, record)
            )

    def needs_reconciliation(self, run_id: str | None = None) -> list[EffectRecord]:
        """Effects whose outcome is unknown and that no conclusion settles yet."""
        from agentctl.engine.effects.unsettled import needs_reconciliation
        from agentctl.runtime_records import EffectRecord
        from agentctl.store.engine import open_store

        with open_store(self.db, create=False) as store:
            found = needs_reconciliation(store, run_id)
        return [EffectRecord.from_json(effect) for effect in found]
