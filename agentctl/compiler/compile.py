"""``compile_workflow``: a pure function from a parsed workflow to a plan (docs/compiler.md).

Order of work (docs/compiler.md): flatten sub-workflows, expand loops/foreach/matrix, resolve each
task, check needs/templates/schemas/routers/tools/agents, order the graph, check parallel
memory writes and static budget counts, then take predictability and digests. Every stage
reports into one list of located diagnostics and carries on where it can, so a user sees
all the problems of a file at once; a plan is produced only when there is no error.

No I/O happens here: the document has been read and validated by :mod:`agentctl.spec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.compiler.capabilities import CAPABILITY_ORDER, provider_capabilities
from agentctl.compiler.checks import GraphChecker
from agentctl.compiler.definitions import (
    check_agents,
    check_policy,
    check_tools,
    negotiated_capabilities,
)
from agentctl.compiler.drafts import Draft, Reporter, sub_path
from agentctl.compiler.effects import action_effects, agent_effects
from agentctl.compiler.expand import ExpansionCounts, ExpansionSettings, expand_tasks
from agentctl.compiler.extras import check_extras
from agentctl.compiler.fingerprint import Fingerprinter
from agentctl.compiler.flatten import flatten_tasks
from agentctl.compiler.graph import CycleError, stable_order
from agentctl.compiler.identity import resolved_definitions
from agentctl.compiler.inputs import check_input_schema
from agentctl.compiler.limits import check_budget_counts, check_memory_conflicts
from agentctl.compiler.literal_templates import check_literal_templates
from agentctl.compiler.plan import Budget, Plan, PlanTask
from agentctl.compiler.requirements import (
    EffectRequirement,
    ProviderRequirement,
    Requirements,
    ToolRequirement,
)
from agentctl.compiler.resolve import Node, Resolver
from agentctl.compiler.schemas import SchemaChecker
from agentctl.compiler.secret_checks import check_secret_references
from agentctl.compiler.task_parts import PlanArtifact, RouteGuard, worst_predictability
from agentctl.diagnostics import Diagnostic
from agentctl.digest import digest_json
from agentctl.spec.document import Workflow
from agentctl.spec.models_definitions import Tool
from agentctl.spec.models_policy import Compensation, Policy
from agentctl.spec.models_runtime import Runtime
from agentctl.spec.source_map import SourceMap
from agentctl.spec.variables import VariableLayers
from agentctl.spec.vars_files import inline_layers

__all__ = ["CompileResult", "CompileSettings", "compile_document", "compile_workflow"]


@dataclass(frozen=True)
class CompileSettings:
    """Compile-time caps (docs/compiler.md); raise them deliberately, e.g. for the benchmark."""

    max_expansion_items: int = 32
    """Default cap per foreach/matrix when ``maxItems`` is absent."""
    hard_max_expansion_items: int = 256
    """Largest ``maxItems`` a document may declare."""
    max_loop_iterations: int = 64
    max_concurrency: int = 64


@dataclass
class CompileResult:
    plan: Plan | None
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        """A plan exists and no diagnostic is an error (warnings are fine)."""
        return self.plan is not None and not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


def compile_workflow(
    document: Workflow,
    *,
    source: SourceMap | None = None,
    settings: CompileSettings = CompileSettings(),  # noqa: B008 - frozen, shared safely
    variables: VariableLayers | None = None,
) -> CompileResult:
    """Compile a validated workflow; diagnostics carry lines when ``source`` is given.

    ``variables`` are the layers read from files and flags
    (:func:`agentctl.spec.vars_files.load_variables`); without them a document that names
    ``varsFiles`` does not compile."""
    data = document.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return compile_document(data, source=source, settings=settings, variables=variables)


def compile_document(
    data: Mapping[str, Any],
    *,
    source: SourceMap | None = None,
    settings: CompileSettings = CompileSettings(),  # noqa: B008 - frozen, shared safely
    variables: VariableLayers | None = None,
) -> CompileResult:
    """Compile the JSON form of a workflow (camelCase keys, as written, defaults omitted).

    ``data`` must already satisfy the document model; :func:`compile_workflow` is the
    entry point for everything outside the compiler's tests.
    """
    reporter = Reporter(source)
    schemas = SchemaChecker(reporter)
    spec: Mapping[str, Any] = data.get("spec") or {}
    runtime: Mapping[str, Any] = spec.get("runtime") or {}
    max_concurrency = int(runtime.get("maxConcurrency", Runtime.default_of("max_concurrency")))
    if not 1 <= max_concurrency <= settings.max_concurrency:
        reporter.error(
            "schema_violation",
            f"runtime.maxConcurrency must be between 1 and {settings.max_concurrency}",
            "spec.runtime.maxConcurrency",
            help=f"set it to at most {settings.max_concurrency}",
        )

    # runtime.limits may raise the per-construct cap; the settings' own cap (raised by the
    # benchmark) is kept when it is higher.
    raised = (runtime.get("limits") or {}).get("maxItemsPerExpansion")
    hard_max = max(settings.hard_max_expansion_items, int(raised or 0))
    layers = _variable_layers(spec, reporter, variables)
    flat = flatten_tasks(spec, reporter, schemas)
    drafts, counts = expand_tasks(
        flat,
        reporter,
        ExpansionSettings(settings.max_expansion_items, hard_max, settings.max_loop_iterations),
    )
    nodes = Resolver(spec, reporter, layers).resolve_all(drafts)
    GraphChecker(nodes, {d.id for d in drafts}, reporter, schemas).check_all()
    check_tools(spec, reporter, schemas)
    check_input_schema(spec, reporter, schemas)
    check_literal_templates(spec, reporter)
    check_agents(spec, reporter, schemas)
    check_policy(spec, nodes, reporter)
    check_secret_references(spec, reporter)

    order: list[str] | None = None
    try:
        order = stable_order(list(nodes), {i: n.draft.needs for i, n in nodes.items()})
    except CycleError as cycle:
        first = nodes[cycle.cycle[0]].draft
        reporter.error(
            "dependency_cycle",
            f"task dependency cycle: {' -> '.join(cycle.cycle)}",
            sub_path(first.path, "needs"),
            help="remove one of these needs so the tasks can be ordered",
        )
    if order is not None:
        check_memory_conflicts(order, nodes, max_concurrency, reporter)
    planned = {
        "plannedTasks": len(nodes),
        "plannedExpansionItems": counts.expansion_items,
        "plannedLoopIterations": counts.loop_iterations,
    }
    budgets: Mapping[str, Any] = runtime.get("budgets") or {}
    check_budget_counts(budgets, planned, reporter)
    if reporter.errors or order is None:
        return CompileResult(None, reporter.diagnostics)
    plan = _assemble(data, spec, flat, nodes, order, max_concurrency, counts, layers)
    check_extras(plan, nodes, reporter)
    if reporter.errors:
        return CompileResult(None, reporter.diagnostics)
    return CompileResult(plan, reporter.diagnostics)


def _variable_layers(
    spec: Mapping[str, Any], reporter: Reporter, variables: VariableLayers | None
) -> VariableLayers:
    """The inline layers checked here, the file and flag layers taken from ``variables``."""
    inline, problems = inline_layers(spec, reporter.source)
    for problem in problems:
        reporter.diagnostics.append(problem)
        reporter.errors += 1
    if variables is None:
        if _declares_vars_files(spec):
            reporter.error(
                "schema_violation",
                "this workflow names varsFiles, which were not read",
                "spec.varsFiles" if spec.get("varsFiles") else "spec",
                help="compile it through agentctl check/plan/roll, or pass the layers from "
                "agentctl.spec.vars_files.load_variables",
            )
        return inline
    variables.workflow = inline.workflow
    variables.agents = inline.agents
    variables.tasks = inline.tasks
    return variables


def _declares_vars_files(spec: Mapping[str, Any]) -> bool:
    if spec.get("varsFiles"):
        return True
    if any(agent.get("varsFiles") for agent in (spec.get("agents") or {}).values()):
        return True
    definitions = (spec.get("subworkflows") or {}).values()
    tasks = [*(spec.get("tasks") or ()), *(t for d in definitions for t in d.get("tasks") or ())]
    return any(task.get("varsFiles") for task in tasks)


def _assemble(
    data: Mapping[str, Any],
    spec: Mapping[str, Any],
    flat: list[Draft],
    nodes: Mapping[str, Node],
    order: list[str],
    max_concurrency: int,
    counts: ExpansionCounts,
    layers: VariableLayers,
) -> Plan:
    fingerprints = Fingerprinter()
    resolved = resolved_definitions(spec)
    tasks = {task_id: _plan_task(nodes[task_id], fingerprints, resolved) for task_id in order}
    workflow_json = dict(data)
    workflow_json["spec"] = {**spec, "tasks": [draft.definition_json() for draft in flat]}
    material = layers.digest_material()
    if material is not None:
        # Values read from files and flags count in the workflow digest like inline ones.
        workflow_json["variables"] = material
    invocation = layers.invocation_values()
    variables = (
        {"values": invocation, "sources": layers.invocation_sources()} if invocation else None
    )
    runtime: Mapping[str, Any] = spec.get("runtime") or {}
    budget = Budget(
        limits={k: v for k, v in (runtime.get("budgets") or {}).items() if v is not None},
        pricing=runtime.get("pricing"),
        planned_tasks=len(tasks),
        planned_expansion_items=counts.expansion_items,
        planned_loop_iterations=counts.loop_iterations,
    )
    unsigned = Plan(
        workflow_name=str(data["metadata"]["name"]),
        workflow_digest=digest_json(workflow_json),
        plan_digest="",
        order=tuple(order),
        max_concurrency=max_concurrency,
        tasks=tasks,
        predictability=worst_predictability([t.predictability for t in tasks.values()]),
        requirements=_requirements(spec, tasks),
        budget=budget,
        variables=variables,
    )
    return Plan(
        workflow_name=unsigned.workflow_name,
        workflow_digest=unsigned.workflow_digest,
        plan_digest=digest_json(unsigned.digest_material()),
        order=unsigned.order,
        max_concurrency=unsigned.max_concurrency,
        tasks=unsigned.tasks,
        predictability=unsigned.predictability,
        requirements=unsigned.requirements,
        budget=unsigned.budget,
        variables=variables,
    )


def _plan_task(node: Node, fingerprints: Fingerprinter, resolved: Mapping[str, str]) -> PlanTask:
    draft = node.draft
    fields: dict[str, Any] = {
        "id": draft.id,
        "uses": node.uses,
        "needs": tuple(draft.needs),
        "expansion": draft.expansion,
        "route_guards": tuple(RouteGuard(r) for r in dict.fromkeys(node.guards)),
        "memory_writes": node.memory_writes,
        "when": draft.when,
        "vars": node.vars,
        "input": node.input,
        "retry": node.retry,
        "timeout_seconds": node.timeout_seconds,
        "failure": "continue" if draft.failure == "continue" else "stop",
        "compensate": node.compensate,
        "output_schema": node.output_contract,
        "predictability": node.predictability,
    }
    if draft.artifacts:
        fields["artifacts"] = tuple(
            PlanArtifact(str(a["name"]), str(a["path"])) for a in draft.artifacts
        )
    if draft.session:
        fields["session"] = dict(draft.session)
    if node.uses.kind in ("action", "agent"):
        fields["resolved_definition"] = resolved.get(f"{node.uses.kind}:{node.uses.name}", "")
    return PlanTask(
        **fields,
        definition_fingerprint=fingerprints.definition(fields, draft.needs),
        output_contract_fingerprint=fingerprints.contract(node.output_contract),
    )


def _requirements(spec: Mapping[str, Any], tasks: Mapping[str, PlanTask]) -> Requirements:
    providers_spec: Mapping[str, Any] = spec.get("providers") or {}
    agents: Mapping[str, Any] = spec.get("agents") or {}
    tools: Mapping[str, Any] = spec.get("tools") or {}
    actions: Mapping[str, Any] = spec.get("actions") or {}
    mode = str((spec.get("policy") or {}).get("approval", Policy.default_of("approval")))
    # spec.compensation.approval (docs/durable-execution.md): keep the policy, remove the gate, or
    # always ask.
    compensation_mode = {"never": "never", "always": "always"}.get(
        str((spec.get("compensation") or {}).get("approval", Compensation.default_of("approval"))),
        mode,
    )
    needed = negotiated_capabilities(spec)
    providers: list[ProviderRequirement] = []
    for name in sorted(providers_spec):
        users = sorted(a for a, agent in agents.items() if agent.get("provider") == name)
        if not users:
            continue
        kind = str(providers_spec[name].get("kind"))
        offered = provider_capabilities(providers_spec[name])
        required = {cap for agent in users for cap in needed[agent]}
        providers.append(
            ProviderRequirement(
                name=name,
                kind=kind,
                agents=tuple(users),
                capabilities=tuple(c for c in CAPABILITY_ORDER if c in offered),
                required=tuple(c for c in CAPABILITY_ORDER if c in required),
            )
        )
    tool_requirements = tuple(
        ToolRequirement(
            name=name,
            kind=str(tool.get("kind")),
            capability=str(tool.get("capability")),
            effect_class=str(tool.get("effectClass")),
            risk=str(tool.get("risk")),
            idempotency=str(tool.get("idempotency")),
            approval=str(tool.get("approval", Tool.default_of("approval"))),
        )
        for name, tool in sorted(tools.items())
    )
    effects: list[EffectRequirement] = []
    for task in tasks.values():
        if task.uses.kind == "action":
            effects.extend(action_effects(task.id, actions[task.uses.name], mode))
        elif task.uses.kind == "agent":
            effects.extend(agent_effects(task.id, agents[task.uses.name], tools, mode, actions))
        if task.compensate is not None:
            inverse = actions[task.compensate.uses.partition(":")[2]]
            effects.extend(
                action_effects(task.id, inverse, compensation_mode, prefix="compensate:")
            )
    return Requirements(tuple(providers), tool_requirements, tuple(effects))
