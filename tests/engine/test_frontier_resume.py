"""Resume reads the frontier, not the whole run (the performance issue's first goal).

A real ``agentctl roll`` is SIGKILLed after some tasks committed; the stored plan records
of the tasks that had finished are then overwritten with garbage. A resume that read
them (as one that parsed the whole stored plan did) would fail as corrupt; one that reads
only the unfinished tasks and the finished rows they depend on completes with the same
result as an uninterrupted run.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.core.records import load_run
from agentctl.engine.run.executor import RunExecutor
from agentctl.engine.run.outcome import finished_outcome
from agentctl.errors import Cancelled, PersistenceError
from agentctl.ids import SystemClock
from agentctl.store.engine import open_store
from tests.forkserver import run_agentctl

WORKFLOW = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: frontier}
spec:
  memory: {working: {total: 0}}
  actions:
    step: {kind: builtin.assign}
  outputs:
    last: "${{ tasks.s5.output.output.i }}"
    first: "${{ tasks.s0.output.output.i }}"
  tasks:
    - {id: s0, uses: 'action:step', with: {i: 0}}
    - {id: s1, uses: 'action:step', with: {i: 1}, needs: [s0]}
    - {id: s2, uses: 'action:step', with: {i: 2}, needs: [s1]}
    - {id: s3, uses: 'action:step', with: {i: "${{ tasks.s0.output.output.i }}"}, needs: [s2, s0]}
    - {id: s4, uses: 'action:step', with: {i: 4}, needs: [s3]}
    - {id: s5, uses: 'action:step', with: {i: 5}, needs: [s4]}
"""


def _killed_roll(workspace: Path, db: Path, after: int) -> str:
    (workspace / "wf.yaml").write_text(WORKFLOW)
    # Its own process (forked from a server that imported agentctl once): the fault
    # SIGKILLs only the command.
    killed = run_agentctl(
        ["roll", "wf.yaml", "--db", str(db)],
        cwd=workspace,
        env={**os.environ, "AGENTCTL_FAULT": f"task.committed:{after}"},
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    return str(run_id)


def _corrupt_plan_rows(db: Path, run_id: str, task_ids: list[str]) -> None:
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "UPDATE plan_tasks SET record_json = 'not json' WHERE run_id = ? AND task_id = ?",
            [(run_id, t) for t in task_ids],
        )
    conn.close()


def _resume(db: Path, run_id: str) -> Any:
    with open_store(str(db)) as store:
        return asyncio.run(RunExecutor(store, run_id, clock=SystemClock()).execute())


def test_resume_reads_no_plan_record_of_a_finished_task(workspace: Path) -> None:
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)  # s0..s3 committed
    _corrupt_plan_rows(db, run_id, ["s0", "s1", "s2"])
    outcome = _resume(db, run_id)
    assert outcome.state == "succeeded", outcome.error
    # s0's output is read by s3's input and by spec.outputs: its task row, not its plan.
    assert outcome.output == {"last": 5, "first": 0}
    with open_store(str(db)) as store:
        again = finished_outcome(store, run_id)  # one read of the run row
    assert again is not None and again.output == outcome.output


def test_a_corrupt_record_of_an_unfinished_task_stops_the_resume(workspace: Path) -> None:
    """The check is real: the frontier's own records are read, and garbage is refused
    (exit 5, the run stays resumable) rather than run."""
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)
    _corrupt_plan_rows(db, run_id, ["s5"])
    try:
        _resume(db, run_id)
    except PersistenceError as exc:
        assert "malformed" in exc.message and exc.exit_code == 5
    else:
        raise AssertionError("a corrupt plan record of an unfinished task was not noticed")
    with open_store(str(db)) as store, store.read() as conn:
        assert load_run(conn, run_id).status == "running"


def test_whole_plan_is_read_back_in_plan_order(workspace: Path) -> None:
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=2)
    outcome = _resume(db, run_id)
    assert outcome.state == "succeeded"
    with open_store(str(db)) as store, store.read() as conn:
        run = load_run(conn, run_id, whole=True)
    assert run.plan["order"] == [f"s{i}" for i in range(6)]
    assert run.plan["tasks"]["s3"]["needs"] == ["s2", "s0"]
    assert [t["id"] for t in run.workflow["spec"]["tasks"]] == [f"s{i}" for i in range(6)]


def test_a_handed_plan_is_used_only_when_it_is_the_stored_one(workspace: Path) -> None:
    """``roll`` hands the plan it just stored to the execution that follows; a plan whose
    digest is not the stored one (another workflow) is never taken in its place."""
    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.frontier import load_frontier, take_handed
    from agentctl.ids import IdGenerator

    (workspace / "wf.yaml").write_text(WORKFLOW)
    (workspace / "other.yaml").write_text(
        WORKFLOW.replace("name: frontier", "name: other").replace("s5", "t5")
    )
    clock = SystemClock()
    other = prepare_run(str(workspace / "other.yaml")).plan
    with open_store(str(workspace / "runs.db")) as store:
        run_id = create_run(
            store, prepare_run(str(workspace / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
        )
        mine = take_handed(store.path, run_id)
        assert mine is not None and take_handed(store.path, run_id) is None  # once
        with store.read() as conn:
            header = load_run(conn, run_id).plan
            taken, _, _ = load_frontier(conn, run_id, header, lambda: conn, mine)
            refused, _, frontier = load_frontier(conn, run_id, header, lambda: conn, other)
            assert taken.tasks["s5"] is mine.tasks["s5"]  # the same object: not parsed
            assert frontier[-1] == "s5" and "t5" not in refused.order
            assert refused.tasks["s5"] == mine.tasks["s5"]
            assert refused.tasks["s5"] is not mine.tasks["s5"]  # read from its row


def test_an_untouched_runs_rows_are_made_as_creation_wrote_them(workspace: Path) -> None:
    """The first execution of a run created in this process makes its pending rows rather
    than reading them back: they must be the rows a read returns."""
    from agentctl.engine.run.creation import create_run, prepare_run
    from agentctl.engine.run.frontier import load_frontier, take_handed
    from agentctl.ids import IdGenerator

    (workspace / "wf.yaml").write_text(WORKFLOW)
    clock = SystemClock()
    with open_store(str(workspace / "runs.db")) as store:
        run_id = create_run(
            store, prepare_run(str(workspace / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
        )
        handed = take_handed(store.path, run_id)
        with store.read() as conn:
            header = load_run(conn, run_id).plan
            _, made, made_frontier = load_frontier(
                conn, run_id, header, lambda: conn, handed, untouched=True
            )
            _, read, frontier = load_frontier(conn, run_id, header, lambda: conn, handed)
            assert made_frontier == frontier == [f"s{n}" for n in range(6)]
            assert {t: made[t] for t in frontier} == {t: read[t] for t in frontier}


def test_a_repair_executed_in_the_process_that_made_it_reads_its_reused_rows(
    workspace: Path,
) -> None:
    """A repair's reused tasks are written after its creation (with their checkpoints):
    the execution that follows in the same process reads its rows, and does not run the
    reused tasks again."""
    from agentctl.engine.recovery.planner import create_derived_run, plan_repair
    from agentctl.engine.run.creation import prepare_run
    from agentctl.ids import IdGenerator

    db = workspace / "runs.db"
    (workspace / "wf.yaml").write_text(WORKFLOW)
    clock = SystemClock()
    first = run_agentctl(["roll", "wf.yaml", "--db", str(db)], cwd=workspace, timeout=120)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(db) as conn:
        (source,) = conn.execute("SELECT id FROM runs").fetchone()
    (workspace / "wf.yaml").write_text(WORKFLOW.replace("with: {i: 4}", "with: {i: 44}"))
    with open_store(str(db)) as store:
        recovery = plan_repair(
            store, source, prepare_run(str(workspace / "wf.yaml")), from_tasks=()
        )
        run_id = create_derived_run(store, recovery, clock=clock, ids=IdGenerator(clock))
        outcome = asyncio.run(RunExecutor(store, run_id, clock=clock).execute())
    assert outcome.state == "succeeded"
    with sqlite3.connect(db) as conn:
        rows = dict(
            conn.execute("SELECT task_id, disposition FROM tasks WHERE run_id = ?", (run_id,))
        )
    assert rows["s0"] == "reused" and rows["s4"] == "executed"


def _traced_resume(db: Path, run_id: str, events: Any = None) -> tuple[Any, list[str]]:
    from sqlalchemy import event

    from agentctl.engine.run.outcome import ExecutionOptions

    statements: list[str] = []
    with open_store(str(db)) as store:
        store.engine.dispose()
        event.listen(
            store.engine,
            "connect",
            lambda raw, _record: raw.set_trace_callback(statements.append),
        )
        options = ExecutionOptions(cancel_poll_seconds=3600, events=events)
        try:
            outcome = asyncio.run(
                RunExecutor(store, run_id, clock=SystemClock(), options=options).execute()
            )
        except Cancelled as stop:
            outcome = stop
    return outcome, statements


def test_a_resume_reads_the_cancel_flag_once_in_the_claim(workspace: Path) -> None:
    """The claim's transaction reads the run row, cancel flag included: the first batch
    does not read the flag again (one statement and one connection less per resume)."""
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)
    outcome, statements = _traced_resume(db, run_id)
    assert outcome.state == "succeeded", outcome.error
    assert not [s for s in statements if s.startswith("SELECT cancel_requested")]


def test_a_resume_reads_the_run_in_the_claim_alone(workspace: Path) -> None:
    """No read transaction before the claim: its transaction reads the run row and would
    answer a finished run; and an execution of a finished run returns its stored outcome
    and writes nothing."""
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)
    outcome, statements = _traced_resume(db, run_id)
    assert outcome.state == "succeeded", outcome.error
    assert statements[0] == "BEGIN IMMEDIATE", statements[:3]
    again, statements = _traced_resume(db, run_id)
    assert (again.state, again.output, again.error) == ("succeeded", outcome.output, None)
    assert statements[0] == "BEGIN IMMEDIATE"
    assert not [s for s in statements if s.split()[0] in ("INSERT", "UPDATE", "DELETE")]


def test_a_resume_showing_progress_reads_the_finished_rows_in_one_query(workspace: Path) -> None:
    """Progress starts with every task's state (``agentctl resume`` shows it): the rows of
    the finished tasks are read in one query, not one query per finished task."""
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)
    seen: list[tuple[str, dict[str, Any]]] = []
    outcome, statements = _traced_resume(db, run_id, lambda kind, data: seen.append((kind, data)))
    assert outcome.state == "succeeded", outcome.error
    states = {f"s{i}": "succeeded" for i in range(4)} | {"s4": "pending", "s5": "pending"}
    assert seen[0][0] == "started" and seen[0][1]["tasks"] == states
    row_reads = [s for s in statements if s.startswith("SELECT tasks.task_id, tasks.ordinal")]
    # The unfinished rows, the row they need (s3), then all the others at once.
    assert len(row_reads) == 3, row_reads


def test_the_last_transition_commits_with_the_runs_completion(workspace: Path) -> None:
    """A resume with one task left commits twice: its claim, then that task's transition
    together with the run's end (state, output, lease released)."""
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=5)  # s0..s4 committed
    outcome, statements = _traced_resume(db, run_id)
    assert (outcome.state, outcome.output) == ("succeeded", {"last": 5, "first": 0})
    assert statements.count("COMMIT") == 2, statements
    last = statements[statements.index("COMMIT") + 1 :]
    assert any(s.startswith("UPDATE tasks") for s in last)
    assert any(s.startswith("UPDATE runs") and "owner_id" in s for s in last)


def test_a_resume_never_makes_the_sqlalchemy_engine(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the database and the whole resume (claim, transitions, completion) use the
    driver's connections: SQLAlchemy's engine is made only for what asks for it."""
    from sqlalchemy.engine.base import Engine

    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)

    def no_engine(*args: object, **kwargs: object) -> None:
        raise AssertionError("the resume made a SQLAlchemy engine")

    with monkeypatch.context() as patch:
        patch.setattr(Engine, "__init__", no_engine)
        outcome = _resume(db, run_id)
    assert (outcome.state, outcome.output) == ("succeeded", {"last": 5, "first": 0})
    with open_store(str(db)) as store, store.read() as conn:  # and made when asked for
        assert load_run(conn, run_id).status == "succeeded"


def test_a_cancel_requested_while_the_run_was_down_stops_the_resume(workspace: Path) -> None:
    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE runs SET cancel_requested = 1, cancel_reason = 'operator said stop' "
            "WHERE id = ?",
            (run_id,),
        )
    conn.close()
    stopped, _ = _traced_resume(db, run_id)
    assert isinstance(stopped, Cancelled) and stopped.reason == "operator said stop"
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT task_id, status FROM tasks WHERE run_id = ?", (run_id,)))
        (status,) = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    conn.close()
    assert status == "cancelled"
    assert rows["s4"] != "succeeded" and rows["s5"] != "succeeded"


def test_one_probe_refuses_newer_records_in_family_order(workspace: Path) -> None:
    """The newer-format check reads every record family in one statement; a checkpoint
    (integer key) and a task (text key) both newer: the task is named, as the first family."""
    from agentctl.errors import NewerFormatError

    db = workspace / "runs.db"
    run_id = _killed_roll(workspace, db, after=4)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE checkpoints SET format_version = 7 WHERE seq = 2")
        conn.execute("UPDATE tasks SET format_version = 9 WHERE task_id = 's1'")
    conn.close()
    with pytest.raises(NewerFormatError) as refused:
        _resume(db, run_id)
    assert f"{run_id}/s1" in refused.value.message and "9" in refused.value.message
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE tasks SET format_version = 1 WHERE task_id = 's1'")
    conn.close()
    with pytest.raises(NewerFormatError) as refused:
        _resume(db, run_id)
    assert f"{run_id}/2" in refused.value.message and "checkpoint" in refused.value.message
