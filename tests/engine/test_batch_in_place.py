"""A batch whose bodies never wait runs its attempts in place (issue 37, W2).

Builtin steps and aggregates return in their first step, so a fan-out of them needs no
asyncio task per attempt; an attempt that does wait (a retry's pause) goes on in a task of
its own. These tests run real fan-outs on real SQLite files: the tasks made, a retry that
waits beside children that finish at once, the events, and a batch that must still use
one task per attempt.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.executor import ExecutionOptions, RunExecutor
from agentctl.engine.run.tasks import never_waits
from agentctl.ids import IdGenerator, SystemClock
from agentctl.store.engine import open_store

HEAD = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: in-place}
spec:
  runtime: {maxConcurrency: 8}
  policy: {approval: never, processAllowlist: [sh]}
  actions:
    step: {kind: builtin.assign}
    flaky: {kind: builtin.fail}
    shell: {kind: builtin.shell.exec, command: sh, args: ["-c", "echo hi"]}
  tasks:
"""
FANOUT = (
    HEAD
    + """\
    - id: unit
      uses: action:step
      foreach: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}
      with: {i: "${{ vars.item }}"}
    - id: join
      uses: action:step
      needs: [unit]
      with: {items: "${{ tasks.unit.output.items }}"}
"""
)
RETRYING = (
    HEAD
    + """\
    - id: ok
      uses: action:step
      foreach: {items: [0, 1, 2]}
      with: {i: "${{ vars.item }}"}
    - id: flaky
      uses: action:flaky
      failure: continue
      foreach: {items: [0, 1]}
      retry: {maxAttempts: 3, backoff: {kind: fixed, initialMs: 7}}
      with: {message: "no ${{ vars.item }}"}
"""
)
MIXED = (
    HEAD
    + """\
    - id: a
      uses: action:step
      with: {x: 1}
    - id: b
      uses: action:shell
"""
)


def _run(tmp_path: Path, text: str, **options: Any) -> tuple[Any, list[str]]:
    """Execute ``text``; the outcome and the coroutine name of every asyncio task made."""
    (tmp_path / "wf.yaml").write_text(text)
    store = open_store(str(tmp_path / "runtime.db"))
    clock = SystemClock()
    run_id = create_run(
        store, prepare_run(str(tmp_path / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
    )
    made: list[str] = []

    async def main() -> Any:
        loop = asyncio.get_running_loop()

        def factory(loop: Any, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
            made.append(getattr(coro, "__qualname__", type(coro).__name__))
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)
        executor = RunExecutor(
            store,
            run_id,
            clock=clock,
            options=ExecutionOptions(workspace=str(tmp_path), **options),
        )
        return await executor.execute()

    try:
        return asyncio.run(main()), made
    finally:
        store.close()


def test_a_fan_out_of_builtin_steps_makes_no_task_per_attempt(tmp_path: Path) -> None:
    outcome, made = _run(tmp_path, FANOUT)
    assert outcome.state == "succeeded"
    items = outcome.output["join"]["output"]["items"]
    assert [item["output"]["output"]["i"] for item in items] == list(range(12))
    assert not [name for name in made if "run_task" in name or "_go_on" in name]


def test_a_retry_that_waits_goes_on_in_a_task_of_its_own(tmp_path: Path) -> None:
    waits: list[float] = []
    events: list[tuple[str, Any, Any]] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)  # really waits: the attempt is suspended here

    outcome, made = _run(
        tmp_path,
        RETRYING,
        sleep=sleep,
        events=lambda kind, data: events.append((kind, data.get("taskId"), data.get("attempt"))),
    )
    # Both flaky children fail for good after three attempts; the run then ends failed.
    assert outcome.state == "failed" and outcome.error["code"] == "run.failed"
    assert len(outcome.error["tasks"]) == 2
    # Two retries of each flaky child, each waited for in a task of its own; the other
    # attempts finished in place.
    assert waits == [0.007] * 4
    assert made.count("_go_on") == 2
    started = [
        (task, attempt)
        for kind, task, attempt in events
        if kind == "task.started" and "--" in task  # the children, not their aggregates
    ]
    # Every first attempt starts in batch order, before any retry.
    assert [attempt for _, attempt in started[:5]] == [1] * 5
    assert [task.split("-")[0] for task, _ in started[:5]] == ["ok"] * 3 + ["flaky"] * 2
    flaky = sorted(started[3:5])
    assert sorted(started[5:]) == sorted((task, n) for task, _ in flaky for n in (2, 3))


def test_a_batch_with_a_body_that_waits_keeps_a_task_per_attempt(tmp_path: Path) -> None:
    outcome, made = _run(tmp_path, MIXED)
    assert outcome.state == "succeeded"
    assert outcome.output["b"]["stdout"] == "hi\n"
    assert made.count("TaskAttempts.run_task") == 2


def test_which_bodies_never_wait(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(RETRYING + "    - {id: s, uses: 'action:shell'}\n")
    prepared = prepare_run(str(tmp_path / "wf.yaml"))
    spec = prepared.workflow["spec"]
    waits = {tid: never_waits(task, spec) for tid, task in prepared.plan.tasks.items()}
    children = [tid for tid in waits if tid.startswith(("ok-", "flaky-"))]
    assert len(children) == 5 and all(waits[tid] for tid in children)  # builtin steps
    assert waits["ok"] and waits["flaky"]  # their aggregates
    assert not waits["s"]  # a process
