"""Every diagnostic the compiler emits: code, dotted path, line and a help text."""

from __future__ import annotations

from agentctl.compiler import CompileSettings

from .helpers import compile_spec, line_of, only

ASSIGN = """\
actions:
  set: { kind: builtin.assign }
"""


def test_duplicate_task() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
  - id: a
    uses: action:set
"""
    )
    result = compile_spec(spec)
    found = only(result, "duplicate_task")
    assert found.path == "spec.tasks[1].id"
    assert found.line == line_of(spec, "- id: a", 2)
    assert found.help and found.file == "wf.yaml"
    assert result.plan is None and not result.ok


def test_generated_id_collides_with_declared_task() -> None:
    spec = (
        ASSIGN
        + """\
subworkflows:
  sub:
    version: 1.0.0
    inputSchema: { type: object }
    outputSchema: { type: object }
    tasks:
      - id: step
        uses: action:set
tasks:
  - id: call
    uses: workflow:sub
  - id: call--step
    uses: action:set
"""
    )
    found = only(compile_spec(spec), "duplicate_task")
    assert found.path == "spec.tasks[1].id"
    assert found.line == line_of(spec, "- id: call--step")


def test_missing_need() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    needs: [ghost]
"""
    )
    found = only(compile_spec(spec), "missing_reference")
    assert found.path == "spec.tasks[0].needs[0]"
    assert found.line == line_of(spec, "needs: [ghost]")
    assert "ghost" in found.message


def test_missing_action() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:nope
"""
    )
    found = only(compile_spec(spec), "missing_reference")
    assert found.path == "spec.tasks[0].uses"
    assert found.line == line_of(spec, "uses: action:nope")
    assert found.help is not None and "spec.actions" in found.help


def test_template_reads_unknown_task() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    with:
      x: "${{ tasks.ghost.output.v }}"
"""
    )
    found = only(compile_spec(spec), "missing_reference")
    assert found.path == "spec.tasks[0].with.x"
    assert found.line == line_of(spec, "x: ")


def test_unknown_subworkflow() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: workflow:nope
"""
    )
    found = only(compile_spec(spec), "missing_reference")
    assert found.path == "spec.tasks[0].uses"
    assert found.line == line_of(spec, "uses: workflow:nope")


def test_agent_unknown_tool_and_provider() -> None:
    spec = """\
providers:
  fake: { kind: fake }
agents:
  lost:
    provider: elsewhere
    model: scripted
    instructions: hi
  helper:
    provider: fake
    model: scripted
    instructions: hi
    tools: [ghost_tool]
tasks:
  - id: a
    uses: agent:helper
"""
    result = compile_spec(spec)
    paths = {d.path: d for d in result.diagnostics if d.code == "missing_reference"}
    assert paths["spec.agents.lost.provider"].line == line_of(spec, "provider: elsewhere")
    assert paths["spec.agents.helper.tools[0]"].line == line_of(spec, "tools: [ghost_tool]")


def test_cost_budget_needs_price_entry() -> None:
    spec = """\
providers:
  fake: { kind: fake }
runtime:
  budgets: { maxCostMicrousd: 1000 }
  pricing:
    version: v1
    models:
      fake/other: { inputMicrousdPerMillionTokens: 1, outputMicrousdPerMillionTokens: 1 }
agents:
  helper:
    provider: fake
    model: scripted
    instructions: hi
tasks:
  - id: a
    uses: agent:helper
"""
    found = only(compile_spec(spec), "missing_reference")
    assert found.path == "spec.agents.helper.model"
    assert found.line == line_of(spec, "model: scripted")
    assert "fake/scripted" in found.message


def test_dependency_cycle() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    needs: [b]
  - id: b
    uses: action:set
    needs: [a]
"""
    )
    found = only(compile_spec(spec), "dependency_cycle")
    assert found.message == "task dependency cycle: a -> b -> a"
    assert found.path == "spec.tasks[0].needs"
    assert found.line == line_of(spec, "needs: [b]")


def test_subworkflow_cycle() -> None:
    spec = (
        ASSIGN
        + """\
subworkflows:
  ping:
    version: 1.0.0
    inputSchema: { type: object }
    outputSchema: { type: object }
    tasks:
      - id: call
        uses: workflow:pong
  pong:
    version: 1.0.0
    inputSchema: { type: object }
    outputSchema: { type: object }
    tasks:
      - id: back
        uses: workflow:ping
tasks:
  - id: start
    uses: workflow:ping
"""
    )
    found = only(compile_spec(spec), "dependency_cycle")
    assert found.message == "sub-workflow cycle: ping -> pong -> ping"
    assert found.path == "spec.subworkflows.pong.tasks[0].uses"
    assert found.line == line_of(spec, "uses: workflow:ping", 1)


def test_invalid_template_syntax() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    with:
      home: "${{ env.HOME }}"
"""
    )
    found = only(compile_spec(spec), "invalid_template")
    assert found.path == "spec.tasks[0].with.home"
    assert found.line == line_of(spec, "home:")


def test_template_read_needs_direct_dependency() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
  - id: b
    uses: action:set
    with:
      v: "${{ tasks.a.output.x }}"
"""
    )
    found = only(compile_spec(spec), "invalid_template")
    assert found.path == "spec.tasks[1].with.v"
    assert found.line == line_of(spec, "v: ")
    assert found.help == "add `a` to this task's needs"


def test_router_select_must_be_whole_template() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: pick
    uses: router
    route:
      select: "channel ${{ inputs.channel }}"
      cases:
        - { equals: a, tasks: [go] }
  - id: go
    uses: action:set
    needs: [pick]
"""
    )
    found = only(compile_spec(spec), "invalid_template")
    assert found.path == "spec.tasks[0].route.select"
    assert found.line == line_of(spec, "select:")


def test_loop_while_must_be_whole_template() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: poll
    uses: action:set
    loop:
      maxIterations: 3
      while: "vars.loopIndex < 2"
"""
    )
    found = only(compile_spec(spec), "invalid_template")
    assert found.path == "spec.tasks[0].loop.while"
    assert found.line == line_of(spec, "while:")


def test_invalid_when_condition() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    when: "${{ inputs.n > big }}"
"""
    )
    found = only(compile_spec(spec), "invalid_template")
    assert found.path == "spec.tasks[0].when"
    assert found.line == line_of(spec, "when:")


def test_fake_provider_rejects_reasoning() -> None:
    spec = """\
providers:
  fake: { kind: fake }
agents:
  thinker:
    provider: fake
    model: scripted
    instructions: think
    reasoning: { effort: high }
tasks:
  - id: a
    uses: agent:thinker
"""
    found = only(compile_spec(spec), "unsupported_capability")
    assert "reasoning_effort" in found.message
    assert found.path == "spec.agents.thinker.reasoning"
    assert found.line == line_of(spec, "reasoning:")


def test_unknown_provider_option() -> None:
    spec = """\
providers:
  fake: { kind: fake }
agents:
  helper:
    provider: fake
    model: scripted
    instructions: hi
    providerOptions: { store: true }
tasks:
  - id: a
    uses: agent:helper
"""
    result = compile_spec(spec)
    option = [d for d in result.diagnostics if d.path == "spec.agents.helper.providerOptions.store"]
    assert [d.code for d in option] == ["unsupported_capability", "unsupported_capability"]
    assert option[0].line == line_of(spec, "providerOptions:")


def test_compensate_on_pure_task() -> None:
    spec = """\
actions:
  set: { kind: builtin.assign }
  put: { kind: builtin.write }
tasks:
  - id: a
    uses: action:set
    compensate:
      uses: action:put
"""
    found = only(compile_spec(spec), "unsupported_capability")
    assert found.path == "spec.tasks[0].compensate"
    assert found.line == line_of(spec, "compensate:")


def test_subworkflow_templated_memory_key() -> None:
    spec = """\
actions:
  remember: { kind: builtin.memory.write }
subworkflows:
  sub:
    version: 1.0.0
    inputSchema: { type: object }
    outputSchema: { type: object }
    tasks:
      - id: w
        uses: action:remember
        memoryWrites: [k]
        with: { key: "${{ inputs.k }}", value: 1 }
tasks:
  - id: call
    uses: workflow:sub
"""
    found = only(compile_spec(spec), "unsupported_capability")
    assert found.path == "spec.subworkflows.sub.tasks[0].with.key"
    assert found.line == line_of(spec, "with: { key:")


def test_process_outside_allowlist_is_a_policy_warning() -> None:
    spec = """\
actions:
  sh: { kind: builtin.shell.exec, command: /usr/bin/make }
tasks:
  - id: a
    uses: action:sh
"""
    result = compile_spec(spec)
    found = only(result, "policy_denied")
    assert found.severity == "warning"
    assert found.path == "spec.actions.sh.command"
    assert found.line == line_of(spec, "sh: {")
    assert result.ok and result.plan is not None


def test_denied_label_and_provider_are_policy_warnings() -> None:
    spec = """\
policy:
  toolsDeny: [filesystem.write, echo]
  providers: [other]
providers:
  fake: { kind: fake }
  other: { kind: fake }
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
agents:
  helper: { provider: fake, model: scripted, instructions: hi, tools: [echo] }
actions:
  put: { kind: builtin.write }
tasks:
  - id: a
    uses: action:put
    with: { path: out/x, content: y }
  - id: b
    uses: agent:helper
"""
    result = compile_spec(spec)
    found = {d.path: d for d in result.diagnostics if d.code == "policy_denied"}
    assert set(found) == {
        "spec.actions.put.kind",
        "spec.agents.helper.provider",
        "spec.agents.helper.tools[0]",
    }
    assert found["spec.actions.put.kind"].line == line_of(spec, "put: {")
    assert result.ok


def test_foreach_over_default_cap() -> None:
    items = ", ".join(str(i) for i in range(5))
    spec = (
        ASSIGN
        + f"""\
tasks:
  - id: fan
    uses: action:set
    foreach:
      items: [{items}]
"""
    )
    result = compile_spec(spec, CompileSettings(max_expansion_items=4))
    found = only(result, "schema_violation")
    assert found.path == "spec.tasks[0].foreach"
    assert found.line == line_of(spec, "foreach:")
    assert "5 items" in found.message


def test_max_items_above_hard_cap() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: fan
    uses: action:set
    matrix:
      axes: { os: [a, b] }
      maxItems: 10
"""
    )
    found = only(
        compile_spec(spec, CompileSettings(hard_max_expansion_items=8)), "schema_violation"
    )
    assert found.path == "spec.tasks[0].matrix.maxItems"
    assert found.line == line_of(spec, "maxItems: 10")
    assert found.help is not None and "maxItemsPerExpansion" in found.help


def test_loop_iterations_above_setting() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: poll
    uses: action:set
    loop: { maxIterations: 5, while: "${{ vars.loopIndex < 2 }}" }
"""
    )
    found = only(compile_spec(spec, CompileSettings(max_loop_iterations=4)), "schema_violation")
    assert found.path == "spec.tasks[0].loop.maxIterations"
    assert found.line == line_of(spec, "loop:")


def test_concurrency_above_setting() -> None:
    spec = (
        ASSIGN
        + """\
runtime: { maxConcurrency: 4 }
tasks:
  - id: a
    uses: action:set
"""
    )
    found = only(compile_spec(spec, CompileSettings(max_concurrency=2)), "schema_violation")
    assert found.path == "spec.runtime.maxConcurrency"
    assert found.line == line_of(spec, "runtime:")


def test_expansion_binding_conflicts_with_vars() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: fan
    uses: action:set
    vars: { foreachIndex: 1 }
    foreach: { items: [a] }
"""
    )
    found = only(compile_spec(spec), "schema_violation")
    # A reserved name is refused in every variable layer, located at the key itself.
    assert found.path == "spec.tasks[0].vars.foreachIndex"
    assert "reserved variable `foreachIndex`" in found.message
    assert found.line == line_of(spec, "vars:")


def test_memory_writes_on_wrong_kind() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    memoryWrites: [k]
"""
    )
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.tasks[0].memoryWrites"
    assert found.line == line_of(spec, "memoryWrites:")


def test_templated_memory_key_needs_declared_set() -> None:
    spec = """\
actions:
  remember: { kind: builtin.memory.write }
tasks:
  - id: a
    uses: action:remember
    with:
      key: "${{ inputs.k }}"
"""
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.tasks[0].with.key"
    assert found.line == line_of(spec, "key:")


def test_parallel_memory_conflict() -> None:
    spec = """\
runtime: { maxConcurrency: 2 }
actions:
  remember: { kind: builtin.memory.write }
tasks:
  - id: one
    uses: action:remember
    with: { key: same, value: 1 }
  - id: two
    uses: action:remember
    with: { key: same, value: 2 }
"""
    found = only(compile_spec(spec), "schema_violation")
    assert "`one` and `two`" in found.message
    assert found.path == "spec.tasks[1].with.key"
    assert found.line == line_of(spec, "with: { key: same, value: 2 }")
    sequential = spec.replace("maxConcurrency: 2", "maxConcurrency: 1")
    assert compile_spec(sequential).ok
    ordered = spec + "    needs: [one]\n"
    assert compile_spec(ordered).ok


def test_budget_max_tasks() -> None:
    spec = (
        ASSIGN
        + """\
runtime:
  budgets: { maxTasks: 2 }
tasks:
  - id: fan
    uses: action:set
    foreach: { items: [1, 2] }
"""
    )
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.runtime.budgets.maxTasks"
    assert found.line == line_of(spec, "budgets:")
    assert "3 compiled tasks" in found.message


def test_budget_expansion_and_loop_counts() -> None:
    spec = (
        ASSIGN
        + """\
runtime:
  budgets: { maxExpansionItems: 1, maxLoopIterations: 2 }
tasks:
  - id: fan
    uses: action:set
    foreach: { items: [1, 2] }
  - id: poll
    uses: action:set
    loop: { maxIterations: 3, while: "${{ vars.loopIndex < 1 }}" }
"""
    )
    result = compile_spec(spec)
    paths = {d.path for d in result.diagnostics if d.code == "schema_violation"}
    assert paths == {
        "spec.runtime.budgets.maxExpansionItems",
        "spec.runtime.budgets.maxLoopIterations",
    }


def test_router_destination_must_need_router() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: pick
    uses: router
    route:
      select: "${{ inputs.channel }}"
      cases:
        - { equals: a, tasks: [go] }
  - id: go
    uses: action:set
"""
    )
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.tasks[0].route.cases[0].tasks[0]"
    assert found.line == line_of(spec, "- { equals: a")
    assert found.help == "add `pick` to the needs of `go`"


def test_router_unknown_destination() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: pick
    uses: router
    route:
      select: "${{ inputs.channel }}"
      cases:
        - { equals: a, tasks: [ghost] }
"""
    )
    found = only(compile_spec(spec), "missing_reference")
    assert found.path == "spec.tasks[0].route.cases[0].tasks[0]"


def test_invalid_output_schema() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:set
    outputSchema: { type: 12 }
"""
    )
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.tasks[0].outputSchema.type"  # located at the keyword
    assert found.line == line_of(spec, "outputSchema:")


def test_tool_input_schema_must_be_strict() -> None:
    spec = """\
tools:
  echo:
    kind: builtin.echo
    description: echo
    inputSchema: { type: object, properties: { a: { type: string } } }
    outputSchema: { type: object }
    capability: internal
    risk: low
    effectClass: pure
    idempotency: pure
    retrySafe: true
    timeoutSeconds: 5
actions:
  set: { kind: builtin.assign }
tasks:
  - id: a
    uses: action:set
"""
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.tools.echo.inputSchema"
    assert found.line == line_of(spec, "inputSchema:")


def test_all_problems_are_collected() -> None:
    spec = (
        ASSIGN
        + """\
tasks:
  - id: a
    uses: action:nope
  - id: b
    uses: action:set
    needs: [ghost]
  - id: b
    uses: action:set
"""
    )
    codes = sorted(d.code for d in compile_spec(spec).diagnostics)
    assert codes == ["duplicate_task", "missing_reference", "missing_reference"]


def test_invalid_tool_schema_is_reported_once_without_strictness_noise() -> None:
    spec = """\
tools:
  echo:
    kind: builtin.echo
    description: echo
    inputSchema: { type: object, required: [{}], additionalProperties: false }
    outputSchema: { type: object }
    capability: internal
    risk: low
    effectClass: pure
    idempotency: pure
    retrySafe: true
    timeoutSeconds: 5
actions:
  set: { kind: builtin.assign }
tasks:
  - id: a
    uses: action:set
"""
    found = only(compile_spec(spec), "schema_violation")
    assert found.path == "spec.tools.echo.inputSchema.required[0]"
    assert "not a valid JSON Schema" in found.message


def _invocation(retry: dict[str, object]) -> list[str]:
    from agentctl.compiler import compile_document

    data = {
        "apiVersion": "agentctl.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "calls"},
        "spec": {
            "subworkflows": {
                "s": {"version": "1.0.0", "inputSchema": {}, "outputSchema": {}, "tasks": []}
            },
            "tasks": [{"id": "a", "uses": "workflow:s", "retry": retry}],
        },
    }
    return [d.message for d in compile_document(data).diagnostics if d.is_error]


def test_an_invocation_retry_is_judged_against_the_retry_models_defaults() -> None:
    # The compiler reads the invocation's retry through the spec's Retry model: restating
    # its defaults is allowed, anything else is a setting the invocation cannot take.
    assert _invocation({"maxAttempts": 1, "backoffMs": 0}) == []
    (message,) = _invocation({"maxAttempts": 2})
    assert message.endswith("it also sets retry")
    (message,) = _invocation({"retryOn": ["transient"]})
    assert message.endswith("it also sets retry")
