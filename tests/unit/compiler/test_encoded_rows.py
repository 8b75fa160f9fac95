"""A run's plan rows are written member by member (compiler/plan_rows.py ``encoded_rows``), with
the parts a fan-out's children share encoded once; each row must be byte for byte
``canonical_json(task.to_row())``, the definition every stored plan row has had, for any
task and whatever its parts share with the tasks before it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentctl.compiler.plan import PlanTask
from agentctl.compiler.plan_rows import encoded_rows
from agentctl.compiler.task_parts import (
    BackoffPolicy,
    Compensation,
    Expansion,
    PlanArtifact,
    RetryPolicy,
    RouteGuard,
    TaskUses,
)
from agentctl.digest import canonical_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children),
    max_leaves=8,
).filter(lambda value: "Infinity" not in repr(value) and "inf" not in repr(value))
OBJECTS = st.dictionaries(st.text(max_size=8), JSON, max_size=4)
NAMES = st.text(min_size=1, max_size=10)

RETRIES = st.builds(
    RetryPolicy,
    max_attempts=st.sampled_from([1, 2, 5]),
    backoff_ms=st.sampled_from([0, 0, 250]),
    backoff=st.none() | st.just(BackoffPolicy()),
    retry_on=st.none() | st.tuples(NAMES),
)
USES = st.builds(
    TaskUses,
    kind=st.sampled_from(["action", "agent", "aggregate"]),
    name=NAMES | st.lists(NAMES, max_size=3),
)
EXPANSIONS = st.builds(Expansion, parent=NAMES, index=st.integers(0, 999), bindings=OBJECTS)
COMPENSATIONS = st.builds(
    Compensation, uses=NAMES, input=OBJECTS, retry=RETRIES, timeout_seconds=st.integers(1, 99)
)


@st.composite
def tasks(draw: Any) -> list[PlanTask]:
    """Tasks that share some parts (one object for many, as a fan-out's children do)."""
    shared = {
        "uses": draw(USES),
        "input": draw(OBJECTS),
        "retry": draw(RETRIES),
        "output_schema": draw(st.none() | OBJECTS),
        "compensate": draw(st.none() | COMPENSATIONS),
    }
    made: list[PlanTask] = []
    for index in range(draw(st.integers(1, 6))):
        own = draw(st.booleans())
        fields = {key: draw(st.sampled_from([value])) for key, value in shared.items()}
        if own:  # this task has parts of its own
            fields.update(
                uses=draw(USES),
                input=draw(OBJECTS),
                retry=draw(RETRIES),
                output_schema=draw(st.none() | OBJECTS),
                compensate=draw(st.none() | COMPENSATIONS),
            )
        made.append(
            PlanTask(
                id=f"t{index}",
                needs=draw(st.tuples() | st.tuples(NAMES, NAMES)),
                expansion=draw(
                    st.none()
                    | st.builds(
                        Expansion, parent=NAMES, index=st.integers(0, 999), bindings=OBJECTS
                    )
                ),
                route_guards=draw(st.tuples() | st.tuples(st.builds(RouteGuard, router=NAMES))),
                memory_writes=draw(st.tuples() | st.tuples(NAMES)),
                when=draw(st.none() | st.text(max_size=12)),
                vars=draw(OBJECTS),
                timeout_seconds=draw(st.integers(1, 3600)),
                failure=draw(st.sampled_from(["stop", "continue"])),
                predictability=draw(
                    st.sampled_from(["fully_predictable", "partially_predictable"])
                ),
                artifacts=draw(st.tuples() | st.tuples(st.builds(PlanArtifact, NAMES, NAMES))),
                session=draw(st.none() | st.just({}) | OBJECTS),
                resolved_definition=draw(st.sampled_from(["", "sha256:abc"])),
                definition_fingerprint=draw(st.text(max_size=12)),
                output_contract_fingerprint=draw(st.text(max_size=12)),
                **fields,
            )
        )
    return made


@given(tasks())
def test_encoded_rows_are_the_canonical_rows(plan_tasks: list[PlanTask]) -> None:
    assert list(encoded_rows(plan_tasks)) == [canonical_json(t.to_row()) for t in plan_tasks]


def test_the_rows_of_a_compiled_fan_out_are_the_canonical_rows(tmp_path: Path) -> None:
    from agentctl.engine.run.creation import prepare_run

    (tmp_path / "wf.yaml").write_text(
        """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fan}
spec:
  policy: {approval: never}
  actions:
    step: {kind: builtin.assign}
  tasks:
    - id: unit
      uses: action:step
      retry: {maxAttempts: 2}
      foreach: {items: [1, 2, 3, 4]}
      with: {i: "${{ vars.item }}", ok: true}
    - {id: join, uses: action:step, needs: [unit],
       with: {items: "${{ tasks.unit.output.items }}"}}
"""
    )
    plan = prepare_run(str(tmp_path / "wf.yaml")).plan
    ordered = [plan.tasks[t] for t in plan.order]
    assert list(encoded_rows(ordered)) == [canonical_json(t.to_row()) for t in ordered]
