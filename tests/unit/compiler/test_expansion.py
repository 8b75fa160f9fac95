"""Shapes of expanded plans: foreach, matrix, loop, sub-workflows, routers, contracts."""

from __future__ import annotations

from agentctl.compiler.naming import expansion_child_id

from .helpers import compile_spec, plan_json

ASSIGN = """\
actions:
  set: { kind: builtin.assign }
  put: { kind: builtin.write }
  remember: { kind: builtin.memory.write }
  sh: { kind: builtin.shell.exec, command: echo }
"""


def test_foreach_children_then_aggregate_in_place() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
runtime: { defaultTimeoutSeconds: 30 }
tasks:
  - id: start
    uses: action:set
  - id: fan
    uses: action:sh
    needs: [start]
    foreach: { items: [a, b], as: name }
    vars: { base: x }
    when: "${{ inputs.go == true }}"
    timeoutSeconds: 7
    retry: { maxAttempts: 3, backoffMs: 10 }
    failure: continue
    with: { label: "${{ vars.name }}" }
  - id: after
    uses: action:set
    needs: [fan]
    with: { all: "${{ tasks.fan.output.items }}" }
"""
        )
    )
    first = expansion_child_id("fan", 0, {"foreachIndex": 0, "name": "a"})
    second = expansion_child_id("fan", 1, {"foreachIndex": 1, "name": "b"})
    assert plan["order"] == ["start", first, second, "fan", "after"]
    child = plan["tasks"][first]
    assert child["needs"] == ["start"]
    assert child["vars"] == {"base": "x", "name": "a", "foreachIndex": 0}
    assert child["expansion"] == {
        "parent": "fan",
        "index": 0,
        "bindings": {"foreachIndex": 0, "name": "a"},
    }
    assert child["when"] == "${{ inputs.go == true }}"
    # Unlike upstream: children keep the source task's timeout.
    assert child["timeoutSeconds"] == 7
    assert child["retry"] == {"maxAttempts": 3, "backoffMs": 10}
    assert child["failure"] == "continue"
    assert child["predictability"] == "requires_execution"
    aggregate = plan["tasks"]["fan"]
    assert aggregate["uses"] == {"kind": "aggregate", "name": [first, second]}
    assert aggregate["needs"] == [first, second]
    assert aggregate["when"] is None and aggregate["vars"] == {} and aggregate["input"] == {}
    assert aggregate["failure"] == "continue"
    assert aggregate["timeoutSeconds"] == 30
    assert aggregate["outputSchema"]["required"] == ["items"]
    assert plan["budget"]["plannedExpansionItems"] == 2
    assert plan["budget"]["plannedTasks"] == 5


def test_matrix_order_and_bindings() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
tasks:
  - id: builds
    uses: action:set
    matrix:
      axes:
        python: ["3.11", "3.12"]
        arch: [amd64, arm64]
"""
        )
    )
    children = plan["tasks"]["builds"]["uses"]["name"]
    assert children == [
        "builds--0000-f8f3437c091e",
        "builds--0001-9df013d0f907",
        "builds--0002-f710ed5770d3",
        "builds--0003-fdb83aa6ee39",
    ]
    combos = [plan["tasks"][c]["vars"]["matrix"] for c in children]
    assert combos[1] == {"arch": "amd64", "python": "3.12"}
    assert [plan["tasks"][c]["vars"]["matrixIndex"] for c in children] == [0, 1, 2, 3]


def test_empty_foreach_gives_aggregate_without_children() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
tasks:
  - id: first
    uses: action:set
  - id: fan
    uses: action:set
    needs: [first]
    foreach: { items: [] }
"""
        )
    )
    assert plan["tasks"]["fan"]["needs"] == []
    assert plan["order"] == ["first", "fan"]


def test_loop_iterations_chain_and_guard() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
tasks:
  - id: poll
    uses: action:set
    loop:
      maxIterations: 3
      while: "${{ loop.output.done != true }}"
      initial: { done: false }
    with: { prev: "${{ vars.loopPrevious }}" }
"""
        )
    )
    aggregate = plan["tasks"]["poll"]
    children = aggregate["uses"]["name"]["children"]
    assert aggregate["uses"]["kind"] == "loop_aggregate"
    assert aggregate["uses"]["name"]["condition"] == "${{ vars.loopPrevious.done != true }}"
    assert len(children) == 3
    zero, one, _ = (plan["tasks"][c] for c in children)
    assert zero["vars"] == {"loopIndex": 0, "loopPrevious": {"done": False}}
    assert zero["needs"] == []
    assert one["needs"] == [children[0]]
    assert one["vars"]["loopPrevious"] == "${{ tasks." + children[0] + ".output }}"
    assert one["when"] == "${{ vars.loopPrevious.done != true }}"
    assert aggregate["outputSchema"]["required"] == ["iterations", "items"]
    assert plan["budget"]["plannedLoopIterations"] == 3
    assert plan["order"] == [*children, "poll"]


def test_subworkflow_flattening_isolates_state_and_rewrites_templates_only() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
runtime: { maxConcurrency: 2 }
subworkflows:
  store:
    version: 1.0.0
    inputs: { value: 1 }
    inputSchema: { type: object }
    outputSchema: { type: object }
    outputs:
      saved: "${{ tasks.write.output.after }}"
    tasks:
      - id: write
        uses: action:remember
        with:
          key: result
          value: "${{ inputs.value }}"
          note: "see inputs.txt and memory.notes"
      - id: read
        uses: action:set
        needs: [write]
        when: inputs.value
        with:
          seen: "${{ memory.result }}"
          prior: "${{ tasks.write.output.after }}"
tasks:
  - id: left
    uses: workflow:store
  - id: right-side
    uses: workflow:store
    with: { value: 2 }
"""
        )
    )
    boundary = "left--inputs-" + plan["tasks"]["left"]["needs"][-1].rsplit("-", 1)[1]
    assert plan["order"][:4] == [boundary, "left--write", "left--read", "left"]
    write = plan["tasks"]["left--write"]
    assert write["memoryWrites"] == ["left__result"]
    assert write["input"]["key"] == "left__result"
    assert write["input"]["value"] == "${{ tasks." + boundary + ".output.value }}"
    # Unlike upstream: text outside templates is not rewritten.
    assert write["input"]["note"] == "see inputs.txt and memory.notes"
    read = plan["tasks"]["left--read"]
    assert read["needs"] == ["left--write", boundary]
    assert read["input"]["seen"] == "${{ memory.left__result }}"
    assert read["input"]["prior"] == "${{ tasks.left--write.output.after }}"
    assert read["when"] == f"tasks.{boundary}.output.value"
    assert plan["tasks"]["right-side--write"]["memoryWrites"] == ["right_side__result"]
    aggregate = plan["tasks"]["left"]
    assert aggregate["uses"]["kind"] == "subworkflow_aggregate"
    assert aggregate["uses"]["name"]["children"] == ["left--write", "left--read"]
    assert aggregate["input"] == {"saved": "${{ tasks.left--write.output.after }}"}
    assert plan["tasks"][boundary]["input"] == {"value": 1}
    assert plan["tasks"][boundary]["uses"] == {
        "kind": "subworkflow_input",
        "name": {"name": "store", "version": "1.0.0"},
    }


def test_router_guards_and_expanded_destination() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
tasks:
  - id: pick
    uses: router
    route:
      select: "${{ inputs.channel }}"
      cases:
        - { equals: stable, tasks: [fan] }
      default: [hold]
  - id: fan
    uses: action:set
    needs: [pick]
    foreach: { items: [1, 2] }
  - id: hold
    uses: action:set
    needs: [pick]
"""
        )
    )
    assert plan["tasks"]["pick"]["uses"]["name"]["default"] == ["hold"]
    assert plan["tasks"]["hold"]["routeGuards"] == [{"router": "pick"}]
    # Unlike upstream: an expanded destination is guarded on its children and its aggregate.
    for child in plan["tasks"]["fan"]["uses"]["name"]:
        assert plan["tasks"][child]["routeGuards"] == [{"router": "pick"}]
    assert plan["tasks"]["fan"]["routeGuards"] == [{"router": "pick"}]
    assert plan["tasks"]["pick"]["outputSchema"]["required"] == [
        "selected",
        "matched",
        "destinations",
    ]


def test_compensate_copied_to_children_and_effects_listed() -> None:
    result = compile_spec(
        ASSIGN
        + """\
policy: { approval: mutations, writableRoots: [out] }
tasks:
  - id: save
    uses: action:put
    foreach: { items: [a] }
    with: { path: "out/${{ vars.item }}", content: x }
    compensate:
      uses: action:put
      with: { content: "" }
      timeoutSeconds: 9
"""
    )
    plan = plan_json(result)
    child_id = plan["tasks"]["save"]["uses"]["name"][0]
    child = plan["tasks"][child_id]
    assert child["compensate"] == {
        "uses": "action:put",
        "input": {"content": ""},
        "retry": {"maxAttempts": 1, "backoffMs": 0},
        "timeoutSeconds": 9,
    }
    assert plan["tasks"]["save"]["compensate"] is None
    ops = [
        (e["task"], e["operation"], e["approvalPossible"]) for e in plan["requirements"]["effects"]
    ]
    assert ops == [
        (child_id, "builtin.write", True),
        (child_id, "compensate:builtin.write", True),
    ]
    assert plan["predictability"] == "partially_predictable"


def test_agent_requirements_and_contract() -> None:
    plan = plan_json(
        compile_spec(
            """\
providers:
  fake: { kind: fake }
tools:
  echo:
    kind: builtin.echo
    description: echo
    inputSchema: { type: object, properties: {}, additionalProperties: false }
    outputSchema: { type: object }
    capability: internal
    risk: low
    effectClass: pure
    idempotency: pure
    retrySafe: true
    timeoutSeconds: 5
    approval: always
agents:
  helper:
    provider: fake
    model: scripted
    instructions: hi
    tools: [echo]
    vars: { tone: dry, who: agent }
    structuredOutput: { type: object }
tasks:
  - id: ask
    uses: agent:helper
    vars: { who: task }
"""
        )
    )
    task = plan["tasks"]["ask"]
    assert task["vars"] == {"tone": "dry", "who": "task"}
    assert task["outputSchema"] == {"type": "object"}
    provider = plan["requirements"]["providers"][0]
    assert provider["name"] == "fake" and provider["agents"] == ["helper"]
    assert provider["required"] == [
        "text",
        "function_tools",
        "structured_output",
        "continuation",
        "usage",
        "cancellation",
    ]
    assert plan["requirements"]["tools"][0]["approval"] == "always"
    ops = [(e["operation"], e["approvalPossible"]) for e in plan["requirements"]["effects"]]
    assert ops == [("fake", False), ("tool.echo", True)]


def test_subworkflow_as_router_destination_and_nested_invocation() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
runtime: { defaultTimeoutSeconds: 50 }
subworkflows:
  inner:
    version: 0.1.0
    inputSchema: { type: object }
    outputSchema: { type: object }
    tasks:
      - id: leaf
        uses: action:sh
        timeoutSeconds: 5
  outer:
    version: 2.0.0
    inputSchema: { type: object }
    outputSchema: { type: object }
    tasks:
      - id: nested
        uses: workflow:inner
tasks:
  - id: pick
    uses: router
    route:
      select: "${{ inputs.go }}"
      cases:
        - { equals: true, tasks: [call] }
  - id: call
    uses: workflow:outer
    needs: [pick]
    failure: continue
"""
        )
    )
    tasks = plan["tasks"]
    boundary = next(t for t in plan["order"] if t.startswith("call--inputs-"))
    assert tasks[boundary]["needs"] == ["pick"]
    assert tasks[boundary]["routeGuards"] == [{"router": "pick"}]
    assert tasks["call"]["routeGuards"] == [{"router": "pick"}]
    assert tasks["call"]["failure"] == "continue" and tasks[boundary]["failure"] == "continue"
    # The nested invocation is flattened inside the outer one.
    assert "call--nested--leaf" in tasks
    assert tasks["call--nested--leaf"]["timeoutSeconds"] == 5
    assert tasks["call--nested"]["uses"]["kind"] == "subworkflow_aggregate"
    assert tasks["call"]["uses"]["name"]["children"] == ["call--nested"]
    assert tasks["call"]["timeoutSeconds"] == 50


def test_loop_destination_guards_every_iteration() -> None:
    plan = plan_json(
        compile_spec(
            ASSIGN
            + """\
tasks:
  - id: pick
    uses: router
    route:
      select: "${{ inputs.go }}"
      cases:
        - { equals: true, tasks: [poll] }
  - id: poll
    uses: action:set
    needs: [pick]
    loop: { maxIterations: 2, while: "${{ vars.loopIndex < 1 }}" }
"""
        )
    )
    children = plan["tasks"]["poll"]["uses"]["name"]["children"]
    assert [plan["tasks"][c]["routeGuards"] for c in children] == [[{"router": "pick"}]] * 2
    assert plan["tasks"]["poll"]["routeGuards"] == [{"router": "pick"}]


def test_compensation_approval_setting_applies_to_inverse_effects() -> None:
    spec = (
        ASSIGN
        + """\
policy: { approval: never }
compensation: { approval: always }
tasks:
  - id: save
    uses: action:put
    with: { path: out/x, content: y }
    compensate: { uses: action:put, with: { content: "" } }
"""
    )
    effects = plan_json(compile_spec(spec))["requirements"]["effects"]
    assert [(e["operation"], e["approvalPossible"]) for e in effects] == [
        ("builtin.write", False),
        ("compensate:builtin.write", True),
    ]


def test_raised_hard_cap_allows_large_fan_out() -> None:
    from agentctl.compiler import CompileSettings, compile_document

    data = {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "big"},
        "spec": {
            "actions": {"set": {"kind": "builtin.assign"}},
            "tasks": [
                {
                    "id": "fan",
                    "uses": "action:set",
                    "foreach": {"items": list(range(300)), "maxItems": 300},
                }
            ],
        },
    }
    refused = compile_document(data)
    assert [(d.code, d.path) for d in refused.diagnostics] == [
        ("schema_violation", "spec.tasks[0].foreach.maxItems")
    ]
    raised = compile_document(data, settings=CompileSettings(hard_max_expansion_items=300))
    assert raised.plan is not None
    assert len(raised.plan.task("fan").uses.children) == 300
    assert raised.plan.budget.planned_expansion_items == 300
