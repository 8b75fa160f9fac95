"""Creating a run: compile the workflow, merge inputs, and commit the run with its tasks.

Nothing runs until the run row, one row per compiled task (``pending``) and the
``run.created`` audit event have committed together. Problems found here — diagnostics,
bad inputs, action kinds this build cannot execute — exit before any record exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentctl.compiler import CompileSettings, Plan, compile_workflow
from agentctl.compiler.plan_rows import encoded_rows
from agentctl.digest import canonical_json
from agentctl.engine.core.preflight import check_providers
from agentctl.engine.effects.budget import open_ledger
from agentctl.engine.run.frontier import hand_over
from agentctl.errors import UsageError, ValidationError
from agentctl.ids import Clock, IdGenerator
from agentctl.observability.audit import append_event
from agentctl.spec import LoadResult, load_workflow
from agentctl.spec.inputs import merge_inputs, parse_input_pairs, require_declared_inputs
from agentctl.spec.loader import require_workflow_file
from agentctl.spec.vars_files import load_variables
from agentctl.store import locks, plan_repo, runs_repo, tasks_repo
from agentctl.store.engine import Store

__all__ = [
    "PreparedRun",
    "create_run",
    "merge_inputs",
    "require_declared_inputs",
    "parse_input_pairs",
    "prepare_run",
    "recorded_variables",
    "runtime_document",
]


@dataclass(frozen=True)
class PreparedRun:
    plan: Plan
    workflow: dict[str, Any]
    workflow_file: str
    inputs: dict[str, Any]
    workspace: Path
    load: LoadResult


def prepare_run(
    workflow_path: str,
    *,
    inputs_json: str | None = None,
    inputs_file: str | None = None,
    input_pairs: Sequence[str] = (),
    inputs: Mapping[str, Any] | None = None,
    workspace: str | None = None,
    settings: CompileSettings | None = None,
    vars_files: Sequence[str] = (),
    var_pairs: Sequence[str] = (),
    recorded_variables: Mapping[str, Any] | None = None,
    recorded_from: str | None = None,
    check_declared: bool = True,
) -> PreparedRun:
    """Load, validate and compile; merge inputs; check the workspace. No I/O on state.

    ``check_declared=False`` accepts inputs the workflow does not declare: the ones agentctl
    itself passes (a monitor's observation), never a user's typo.

    ``vars_files``/``var_pairs`` are ``--vars-file``/``--var``; ``recorded_variables``
    replaces them with the invocation values a source run recorded (retry, repair)."""
    require_workflow_file(workflow_path)
    loaded = load_workflow(workflow_path)
    if not loaded.ok or loaded.document is None:
        raise ValidationError(
            f"{workflow_path} has {sum(d.is_error for d in loaded.diagnostics)} error(s)",
            diagnostics=loaded.diagnostics,
            hint=f"fix the file; `agentctl check {workflow_path}` shows every diagnostic",
        )
    layers, problems = load_variables(
        loaded,
        vars_files=vars_files,
        var_pairs=var_pairs,
        recorded=recorded_variables,
        recorded_from=recorded_from,
    )
    if any(d.is_error for d in problems):
        raise ValidationError(
            f"{workflow_path}: {sum(d.is_error for d in problems)} problem(s) with its variables",
            diagnostics=[*loaded.diagnostics, *problems],
            hint=f"fix them; `agentctl explain {workflow_path}` shows where each value comes from",
        )
    compiled = compile_workflow(
        loaded.document,
        source=loaded.source,
        settings=settings or CompileSettings(),
        variables=layers,
    )
    if not compiled.ok or compiled.plan is None:
        raise ValidationError(
            f"{workflow_path} does not compile",
            diagnostics=[*loaded.diagnostics, *problems, *compiled.diagnostics],
            hint=f"`agentctl check {workflow_path}` shows every diagnostic",
        )
    document = loaded.document.model_dump(mode="json", by_alias=True)
    base = workspace_dir(workspace) if workspace else Path(workflow_path).resolve().parent
    spec = document.get("spec") or {}
    inputs = merge_inputs(
        spec.get("inputs") or {},
        inputs_json,
        inputs_file,
        input_pairs,
        given=inputs,
        check_declared=check_declared,
        input_schema=spec.get("inputSchema"),
        # A derived run (retry, repair) takes its source run's inputs, checked when that
        # run was created, and agentctl's own inputs (a monitor's) are not the user's.
        check_schema=check_declared and recorded_from is None,
    )
    return PreparedRun(
        plan=compiled.plan,
        workflow=document,
        workflow_file=str(Path(workflow_path).resolve()),
        inputs=inputs,
        workspace=base.resolve(),
        load=loaded,
    )


def workspace_dir(workspace: str | Path) -> Path:
    """``workspace`` as an existing directory (resolved), or a usage error naming it."""
    base = Path(workspace)
    if not base.is_dir():
        raise UsageError(
            f"workspace {base} is not a directory",
            hint="pass an existing directory with --workspace",
        )
    return base.resolve()


def derived_workspace(store: Store, source_run_id: str, given: str | None) -> Path | None:
    """Where a run derived from ``source_run_id`` (retry, repair, fork, compensation) works:
    ``given`` (``--workspace``) when set, else the workspace the source run recorded, so
    the new run sees the files the source saw whatever folder the workflow file is in
    (docs/durable-execution.md). None when neither is known (the workflow file's folder
    then applies)."""
    from agentctl.engine.core.records import load_run

    if given:
        return workspace_dir(given)
    with store.read() as conn:
        recorded = load_run(conn, source_run_id).workspace
    if not recorded:
        return None
    if not Path(recorded).is_dir():
        raise UsageError(
            f"workspace {recorded}, which run {source_run_id} recorded, is not a directory "
            "any more",
            hint="pass the directory the run should work in with --workspace",
            run_id=source_run_id,
        )
    return Path(recorded)


def runtime_document(workflow: Mapping[str, Any]) -> dict[str, Any]:
    """The workflow document without ``spec.tasks``: what a run row keeps for its executor
    (definitions, policy, runtime settings), the same size however many tasks there are.
    The compiled tasks are the plan's rows; the whole document is stored apart."""
    spec = workflow.get("spec")
    if not isinstance(spec, Mapping) or "tasks" not in spec:
        return dict(workflow)
    return {**workflow, "spec": {k: v for k, v in spec.items() if k != "tasks"}}


def create_run(
    store: Store,
    prepared: PreparedRun,
    *,
    clock: Clock,
    ids: IdGenerator,
    mode: str = "execute",
    source_run_id: str | None = None,
    relation: str | None = None,
    reason: str | None = None,
    guard: Callable[[Any], None] | None = None,
    probe_isolation: bool = True,
    link: Callable[[Any, str], None] | None = None,
    link_locks: locks.Locks | None = None,
    actor: str | None = None,
) -> str:
    """Commit the run, its pending tasks and ``run.created`` in one transaction.

    A plan whose container tasks have no reachable runtime is refused first (exit 3);
    ``probe_isolation=False`` skips that for a prediction (``--check``) that runs nothing.
    ``guard`` runs first inside the transaction (under the write lock): an exclusive
    decision such as "no other compensation of this source is live" raises there and
    nothing is created. ``link`` runs last in the same transaction with the new run id
    (a schedule firing records its run there, so both commit or neither does);
    ``link_locks`` names what it writes besides the new run (the schedule's lock), else the
    transaction takes the whole store. ``actor``,
    when given, is recorded in ``run.created`` (who asked for the run: ``ui`` for the
    dashboard)."""
    from agentctl.engine.actions.builtin import unsupported_action_kinds

    plan = prepared.plan
    used_actions = {
        str(task.uses.name) for task in plan.tasks.values() if task.uses.kind == "action"
    }
    unsupported = unsupported_action_kinds(prepared.workflow, used_actions)
    if unsupported:
        raise UsageError(
            f"{prepared.workflow_file} uses action kinds this agentctl cannot execute yet: "
            + ", ".join(unsupported),
            code="workflow.unsupported_action",
            hint="`agentctl check` accepts them; running them needs the MCP, A2A, long-term "
            "memory or process-extension support of a later release",
        )
    # Credentials and endpoints are checked before anything is journaled (exit 6 / 3). A
    # replay dispatches nothing, so it needs no credential: it works on a keyless machine.
    if mode != "replay":
        check_providers(plan, prepared.workflow, workspace=prepared.workspace)
    if probe_isolation:
        from agentctl.engine.core.isolation import check_isolation

        check_isolation(plan, prepared.workflow)
    run_id = ids.run_id(mode if mode != "execute" else "run")
    now = clock.now()
    budgets = ((prepared.workflow.get("spec") or {}).get("runtime") or {}).get("budgets") or {}
    wall = budgets.get("maxWallTimeSeconds")
    deadline = now + timedelta(seconds=int(wall)) if wall else None
    # A new run's rows are its own: on PostgreSQL its creation takes only its run lock, so
    # a busy server's runs keep writing while another is created. A link that names its
    # locks (a schedule's firing) adds them; a guard, or a link that names none, decides on
    # rows beyond the new run (a compensation claim) and keeps the whole store
    # (docs/postgresql.md, "Locks").
    scope: locks.Locks | None = locks.run(run_id)
    if guard is not None or (link is not None and link_locks is None):
        scope = None
    elif link_locks is not None:
        scope = locks.Locks(exclusive=(f"run:{run_id}", *link_locks.exclusive))
    with store.write(scope) as conn:
        if guard is not None:
            guard(conn)
        runs_repo.insert_run(
            conn,
            runs_repo.NewRun(
                id=run_id,
                workflow_name=plan.workflow_name,
                workflow_digest=plan.workflow_digest,
                plan_digest=plan.plan_digest,
                plan_json=canonical_json(plan.header_json()),
                workflow_json=canonical_json(runtime_document(prepared.workflow)),
                workflow_file=prepared.workflow_file,
                inputs_json=canonical_json(prepared.inputs),
                mode=mode,
                workspace=str(prepared.workspace),
                source_run_id=source_run_id,
                relation=relation,
                reason=reason,
                created_at=now,
                deadline_at=deadline,
            ),
        )
        tasks_repo.insert_pending(
            conn,
            run_id,
            (
                (
                    task_id,
                    plan.tasks[task_id].definition_fingerprint,
                    plan.tasks[task_id].output_contract_fingerprint,
                )
                for task_id in plan.order
            ),
        )
        plan_repo.insert_records(
            conn,
            run_id,
            zip(plan.order, encoded_rows(plan.tasks[t] for t in plan.order), strict=True),
        )
        plan_repo.insert_workflow(conn, run_id, canonical_json(prepared.workflow))
        runtime = (prepared.workflow.get("spec") or {}).get("runtime") or {}
        open_ledger(
            conn,
            run_id,
            runtime.get("budgets") or {},
            now,
            ((runtime.get("pricing") or {}).get("version")),
        )
        created: dict[str, Any] = {
            "workflow": plan.workflow_name,
            "workflowDigest": plan.workflow_digest,
            "planDigest": plan.plan_digest,
            "mode": mode,
            "tasks": len(plan.order),
            "sourceRunId": source_run_id,
        }
        if actor is not None:
            created["actor"] = actor
            created["reason"] = reason
        append_event(conn, run_id, "run.created", created, now=now)
        if link is not None:
            link(conn, run_id)
    hand_over(store.path, run_id, plan)
    return run_id


def recorded_variables(store: Store, run_id: str) -> dict[str, Any] | None:
    """The ``--var``/``--vars-file`` values run ``run_id`` was created with (or ``None``).

    A retry or repair compiles its workflow again with exactly these values: an identical
    workflow then has the identical digest, and a derived run never silently drops them."""
    from agentctl.engine.core.records import load_run

    with store.read() as conn:
        run = load_run(conn, run_id)
    variables = run.plan.get("variables")
    return dict(variables.get("values") or {}) if variables else None
