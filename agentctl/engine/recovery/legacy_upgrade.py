"""``runs analyze`` and ``runs upgrade``: prove, then persist, this release's reuse metadata
for the tasks of a run an older release recorded (docs/durable-execution.md, "Runs
recorded by older releases").

A task row carries the metadata reuse is decided by: its definition fingerprint, the digest
of its resolved input, its output contract fingerprint, and the digests of its output and
state delta. An older release computed the fingerprint under an older rule (it covered
less: no resolved definition of the action or agent), and a run recorded before the
workflow document was kept beside it cannot have its definitions resolved at all.

:func:`analyze_run` proves, task by task and from the stored records only, the values this
release's rule gives (the fingerprint by :func:`agentctl.compiler.identity.task_fingerprint`,
the one home of the rule, over the run's stored plan task and workflow), and says why when
it cannot: a task that did not succeed, a definition the stored document does not hold, an
output or delta that no longer matches its recorded digest, an input that does not resolve
to its recorded digest, an effect whose outcome is unknown. :func:`upgrade_run` writes
exactly what the analysis proved, one conditional update per task on the values it read
(a row that changed in between is refused, nothing half-written), with a ``run.upgraded``
audit event; a second upgrade finds every task current and writes nothing.

Effect ids are not rewritten: approvals and idempotency keys are derived from them, and
the journal already recognises an older release's effect by its position and request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic.dataclasses import dataclass as record

from agentctl import hints
from agentctl.compiler.identity import resolved_definitions, task_fingerprint
from agentctl.compiler.plan import Plan, PlanTask
from agentctl.digest import digest_json
from agentctl.engine.core.records import TERMINAL_RUN_STATES, RunLog, RunRow, load_run
from agentctl.engine.effects import journal
from agentctl.error_codes import ErrorCode
from agentctl.errors import BlockedError, StateConflictError
from agentctl.ids import Clock, IdGenerator
from agentctl.spec.expressions import TemplateContext
from agentctl.spec.template_exceptions import TemplateError
from agentctl.spec.templates import render
from agentctl.store import tasks_repo
from agentctl.store.engine import SqlRunner, Store
from agentctl.store.migrate import SCHEMA_HEAD
from agentctl.typed_records import CAMEL, CamelRecord

__all__ = [
    "LEGACY_UPGRADE_VERSION",
    "LegacyRunUpgrade",
    "LegacyRunUpgradeAnalysis",
    "LegacyTaskUpgradeAnalysis",
    "analyze_run",
    "upgrade_run",
]

LEGACY_UPGRADE_VERSION = "agentctl.dev/legacy-upgrade/v1"

#: Reuse metadata, by its name in JSON and its column in the task row.
_FIELDS = {
    "definitionFingerprint": "definition_fingerprint",
    "inputDigest": "input_digest",
    "outputContractFingerprint": "output_contract_fingerprint",
    "outputDigest": "output_digest",
    "stateDeltaDigest": "state_delta_digest",
}


@record(frozen=True, config=CAMEL)
class LegacyTaskUpgradeAnalysis(CamelRecord):
    """One task: whether its record can be given this release's reuse metadata, and why."""

    task_id: str
    state: str
    already_current: bool
    upgradeable: bool
    #: ``already_current``, ``proven`` or ``unavailable``.
    confidence: str
    reasons: list[str]
    #: How each proposed value was proven (field -> where it comes from).
    provenance: dict[str, str]
    recorded_metadata: dict[str, Any] | None
    proposed_metadata: dict[str, Any] | None


@record(frozen=True, config=CAMEL)
class LegacyRunUpgradeAnalysis(CamelRecord):
    api_version: str
    run_id: str
    database_schema_version: str
    terminal: bool
    fully_upgradeable: bool
    already_current: bool
    upgradeable_tasks: list[str]
    unavailable_tasks: list[str]
    #: The earliest tasks whose records cannot be reused: ``repair --from`` these re-runs
    #: them and their dependents and reuses everything else.
    recommended_repair_roots: list[str]
    tasks: list[LegacyTaskUpgradeAnalysis]


@record(frozen=True, config=CAMEL)
class LegacyRunUpgrade(CamelRecord):
    """What ``runs upgrade`` wrote (``upgrade_id`` None when nothing was: a dry run, or no
    task to upgrade) and the analysis before and after it (after: None for a dry run)."""

    upgrade_id: str | None
    run_id: str
    dry_run: bool
    upgraded_tasks: list[str]
    analysis_before: LegacyRunUpgradeAnalysis
    analysis_after: LegacyRunUpgradeAnalysis | None


def analyze_run(store: Store, run_id: str) -> LegacyRunUpgradeAnalysis:
    """Prove, from the stored records only, which tasks of ``run_id`` can carry this
    release's reuse metadata; writes nothing."""
    with store.read() as conn:
        return _analyze(conn, run_id)


def upgrade_run(
    store: Store,
    run_id: str,
    *,
    clock: Clock,
    ids: IdGenerator,
    dry_run: bool = False,
    actor: str = "cli-user",
) -> LegacyRunUpgrade:
    """Persist what :func:`analyze_run` proves (nothing with ``dry_run``); audited."""
    with store.read() as conn:
        before = _analyze(conn, run_id)
    if not before.terminal:
        raise BlockedError(
            f"run {run_id} is not finished; its records are still being written",
            code=ErrorCode.RUN_NOT_TERMINAL,
            hint=f"resume it ({hints.quoted(hints.resume(run_id))}) or cancel it, then upgrade",
            run_id=run_id,
        )
    proven = [t for t in before.tasks if t.upgradeable and t.proposed_metadata is not None]
    upgraded = [t.task_id for t in proven]
    if dry_run or not proven:
        return LegacyRunUpgrade(
            None, run_id, dry_run, upgraded, before, None if dry_run else before
        )
    upgrade_id = ids.new("upgrade")
    now = clock.now()
    with store.write() as conn:
        for task in proven:
            assert task.recorded_metadata is not None and task.proposed_metadata is not None
            expected = {_FIELDS[k]: v for k, v in task.recorded_metadata.items()}
            values = {_FIELDS[k]: v for k, v in task.proposed_metadata.items()}
            if not tasks_repo.replace_metadata(conn, run_id, task.task_id, expected, values):
                raise StateConflictError(
                    f"task {task.task_id} of run {run_id} changed while it was upgraded; "
                    "nothing was written",
                    hint=f"analyze it again ({hints.quoted(f'agentctl runs upgrade {run_id}')})",
                    run_id=run_id,
                )
        RunLog.open(conn, run_id).event(
            conn,
            "run.upgraded",
            {
                "upgradeId": upgrade_id,
                "actor": actor,
                "apiVersion": LEGACY_UPGRADE_VERSION,
                "tasks": {
                    t.task_id: {"from": t.recorded_metadata, "to": t.proposed_metadata}
                    for t in proven
                },
            },
            now=now,
        )
        after = _analyze(conn, run_id)
    return LegacyRunUpgrade(upgrade_id, run_id, False, upgraded, before, after)


def _analyze(conn: SqlRunner, run_id: str) -> LegacyRunUpgradeAnalysis:
    run = load_run(conn, run_id, whole=True)
    plan = Plan.from_json(run.plan)
    rows = {row["task_id"]: row for row in tasks_repo.task_records(conn, run_id)}
    spec = run.workflow.get("spec") or {}
    resolved = resolved_definitions(spec) if spec else {}
    memory: dict[str, Any] = dict((spec.get("memory") or {}).get("working") or {})
    outputs: dict[str, Any] = {}
    tasks: list[LegacyTaskUpgradeAnalysis] = []
    for task_id in plan.order:
        row = rows.get(task_id)
        analysis = _task(conn, run, plan.tasks[task_id], row, resolved, bool(spec))
        analysis = _with_input(analysis, plan.tasks[task_id], row, run, memory, outputs)
        tasks.append(analysis)
        if row is not None and row["output_json"] is not None:
            outputs[task_id] = json.loads(row["output_json"])
        if row is not None and row["state_delta_json"]:
            memory.update(json.loads(row["state_delta_json"]))
    unavailable = [t.task_id for t in tasks if not t.upgradeable and not t.already_current]
    legacy = [t for t in tasks if t.state == "succeeded" and not t.already_current]
    return LegacyRunUpgradeAnalysis(
        api_version=LEGACY_UPGRADE_VERSION,
        run_id=run.id,
        database_schema_version=SCHEMA_HEAD,
        terminal=run.status in TERMINAL_RUN_STATES,
        fully_upgradeable=all(t.upgradeable for t in legacy),
        already_current=not legacy,
        upgradeable_tasks=[t.task_id for t in tasks if t.upgradeable],
        unavailable_tasks=unavailable,
        recommended_repair_roots=_roots(plan, set(unavailable)),
        tasks=tasks,
    )


def _recorded(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: row[column] for name, column in _FIELDS.items()}


def _unavailable(
    task_id: str, state: str, reasons: list[str], recorded: dict[str, Any] | None
) -> LegacyTaskUpgradeAnalysis:
    return LegacyTaskUpgradeAnalysis(
        task_id=task_id,
        state=state,
        already_current=False,
        upgradeable=False,
        confidence="unavailable",
        reasons=reasons,
        provenance={},
        recorded_metadata=recorded,
        proposed_metadata=None,
    )


def _task(
    conn: SqlRunner,
    run: RunRow,
    task: PlanTask,
    row: Mapping[str, Any] | None,
    resolved: Mapping[str, str],
    has_document: bool,
) -> LegacyTaskUpgradeAnalysis:
    if row is None:
        return _unavailable(task.id, "missing", ["the run has no record of this task"], None)
    state = str(row["status"])
    recorded = _recorded(row)
    if state != "succeeded":
        return _unavailable(
            task.id,
            state,
            [f"the task is {state}: only a succeeded task's result can be reused"],
            recorded,
        )
    reasons: list[str] = []
    provenance: dict[str, str] = {}
    if task.uses.kind in ("action", "agent") and (
        not has_document or f"{task.uses.kind}:{task.uses.name}" not in resolved
    ):
        reasons.append(
            f"the run's recorded workflow does not hold {task.uses.kind} `{task.uses.name}` "
            "(a run recorded before the workflow document was kept beside it): the definition "
            "the task ran cannot be proven"
        )
    fingerprint = task_fingerprint(task, resolved)
    provenance["definitionFingerprint"] = (
        "task_fingerprint over the run's stored plan task and workflow document"
    )
    contract = row["output_contract_fingerprint"]
    if contract != task.output_contract_fingerprint:
        reasons.append(
            "the recorded output contract fingerprint differs from the run's compiled plan"
        )
    provenance["outputContractFingerprint"] = "the run's compiled plan"
    output = json.loads(row["output_json"]) if row["output_json"] is not None else None
    if row["output_json"] is None or digest_json(output) != row["output_digest"]:
        reasons.append("the recorded output does not match its recorded digest")
    provenance["outputDigest"] = "digest of the recorded output"
    delta_digest = row["state_delta_digest"]
    if row["state_delta_json"]:
        delta_digest = digest_json(json.loads(row["state_delta_json"]))
        if row["state_delta_digest"] not in (None, delta_digest):
            reasons.append("the recorded state delta does not match its recorded digest")
        provenance["stateDeltaDigest"] = "digest of the recorded state delta"
    unsettled = [
        e.id
        for e in journal.list_effects(conn, run.id, task_id=task.id)
        if e.attempt == int(row["attempt"])
        and e.status in ("started", "uncertain")
        and journal.latest_reconciliation(conn, e.id) is None
    ]
    if unsettled:
        reasons.append(f"effect {unsettled[0]} has no known outcome: reconcile it first")
    proposed = {
        "definitionFingerprint": fingerprint,
        "inputDigest": row["input_digest"],
        "outputContractFingerprint": contract,
        "outputDigest": row["output_digest"],
        "stateDeltaDigest": delta_digest,
    }
    if reasons:
        return _unavailable(task.id, state, reasons, recorded)
    current = proposed == recorded
    return LegacyTaskUpgradeAnalysis(
        task_id=task.id,
        state=state,
        already_current=current,
        upgradeable=not current,
        confidence="already_current" if current else "proven",
        reasons=[],
        provenance={} if current else provenance,
        recorded_metadata=recorded,
        proposed_metadata=None if current else proposed,
    )


def _with_input(
    analysis: LegacyTaskUpgradeAnalysis,
    task: PlanTask,
    row: Mapping[str, Any] | None,
    run: RunRow,
    memory: Mapping[str, Any],
    outputs: Mapping[str, Any],
) -> LegacyTaskUpgradeAnalysis:
    """The input digest, proven by resolving the task's input again from the run's inputs
    and the recorded results before it (what the executor digested when it ran)."""
    if row is None or analysis.proposed_metadata is None and not analysis.already_current:
        return analysis
    try:
        task_vars = render(
            dict(task.vars), TemplateContext(inputs=run.inputs, memory=memory, tasks=outputs)
        )
        rendered = render(
            dict(task.input),
            TemplateContext(inputs=run.inputs, vars=task_vars, memory=memory, tasks=outputs),
        )
    except TemplateError as exc:
        reason = f"its input cannot be resolved again from the recorded results ({exc})"
        return _unavailable(task.id, analysis.state, [reason], analysis.recorded_metadata)
    digest = digest_json(rendered)
    recorded = row["input_digest"]
    if recorded is not None and recorded != digest:
        reason = (
            "its input, resolved again from the recorded results, differs from the recorded digest"
        )
        return _unavailable(task.id, analysis.state, [reason], analysis.recorded_metadata)
    if analysis.already_current:
        return analysis if recorded is not None else _proposed_input(analysis, digest)
    return _proposed_input(analysis, digest)


def _proposed_input(analysis: LegacyTaskUpgradeAnalysis, digest: str) -> LegacyTaskUpgradeAnalysis:
    proposed = dict(analysis.proposed_metadata or analysis.recorded_metadata or {})
    proposed["inputDigest"] = digest
    provenance = dict(analysis.provenance)
    provenance["inputDigest"] = "the task's input resolved again from the recorded results"
    current = proposed == analysis.recorded_metadata
    return LegacyTaskUpgradeAnalysis(
        task_id=analysis.task_id,
        state=analysis.state,
        already_current=current,
        upgradeable=not current,
        confidence="already_current" if current else "proven",
        reasons=[],
        provenance={} if current else provenance,
        recorded_metadata=analysis.recorded_metadata,
        proposed_metadata=None if current else proposed,
    )


def _roots(plan: Plan, unavailable: set[str]) -> list[str]:
    """Unavailable tasks no other unavailable task leads to, in plan order."""
    tainted: set[str] = set()
    roots: list[str] = []
    for task_id in plan.order:
        upstream = any(need in tainted for need in plan.tasks[task_id].needs)
        if task_id in unavailable and not upstream:
            roots.append(task_id)
        if task_id in unavailable or upstream:
            tainted.add(task_id)
    return roots
