"""A parallel batch's transitions are written by statement, not by task (issue 37, W2).

Each task of a batch still gets its own row update, checkpoint and chained audit event in
the batch's one transaction; what changed is how they reach the driver: one
``executemany`` per statement shape, and the audit chain's head read once per transaction
instead of once per event. These tests run real fan-outs on real SQLite files and check
the records, the guard on every row, and the run's output.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.engine.run.executor import RunExecutor
from agentctl.engine.run.outcome import finished_outcome
from agentctl.errors import StateConflictError
from agentctl.ids import IdGenerator, SystemClock
from agentctl.observability.audit import verify_chain
from agentctl.store import runs_repo
from agentctl.store.engine import Store, open_store
from agentctl.store.transitions import guarded_updates

FANOUT = """\
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: fanout}
spec:
  runtime: {maxConcurrency: 8}
  policy: {approval: never}
  actions:
    step: {kind: builtin.assign}
  tasks:
    - id: unit
      uses: action:step
      foreach: {items: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]}
      with: {i: "${{ vars.item }}", ok: true}
    - id: join
      uses: action:step
      needs: [unit]
      with: {items: "${{ tasks.unit.output.items }}"}
"""


def _created(tmp_path: Path) -> tuple[Store, str, Path]:
    (tmp_path / "wf.yaml").write_text(FANOUT)
    db = tmp_path / "runtime.db"
    store = open_store(str(db))
    clock = SystemClock()
    run_id = create_run(
        store, prepare_run(str(tmp_path / "wf.yaml")), clock=clock, ids=IdGenerator(clock)
    )
    return store, run_id, db


def _statements(store: Store) -> list[str]:
    seen: list[str] = []
    store.engine.dispose()  # new connections carry the trace callback
    event.listen(store.engine, "connect", lambda raw, _record: raw.set_trace_callback(seen.append))
    return seen


def _execute(store: Store, run_id: str) -> Any:
    return asyncio.run(RunExecutor(store, run_id, clock=SystemClock()).execute())


def test_every_task_of_a_batch_is_written_whole_with_one_chain_head_read(
    tmp_path: Path,
) -> None:
    store, run_id, db = _created(tmp_path)
    seen = _statements(store)
    outcome = _execute(store, run_id)
    assert outcome.state == "succeeded"
    store.close()

    transactions = sum(1 for s in seen if s.startswith("BEGIN"))
    head_reads = sum(1 for s in seen if "ORDER BY audit_events.seq DESC" in s)
    # Before: one read of the head per event (22 task events); now one per transaction.
    assert head_reads <= transactions < 22

    with sqlite3.connect(db) as conn:
        tasks = conn.execute(
            "SELECT task_id, status, output_digest FROM tasks WHERE run_id = ?", (run_id,)
        ).fetchall()
        checkpoints = {
            row[0]
            for row in conn.execute(
                "SELECT transition FROM checkpoints WHERE run_id = ?", (run_id,)
            )
        }
        events = conn.execute(
            "SELECT task_id, payload_json FROM audit_events WHERE run_id = ? AND kind = ?",
            (run_id, "task.succeeded"),
        ).fetchall()
    conn.close()
    assert len(tasks) == 22  # 20 units, the foreach's aggregate, the join
    for task_id, status, output_digest in tasks:
        assert status == "succeeded" and output_digest.startswith("sha256:")
        assert f"task:{task_id}:succeeded" in checkpoints
    digests = {task_id: output_digest for task_id, _, output_digest in tasks}
    assert {task_id: json.loads(payload)["outputDigest"] for task_id, payload in events} == digests
    with open_store(str(db)) as again, again.read() as conn:
        report = verify_chain(conn, run_id)
    assert report.ok and report.events == 1 + 22 + 1  # created, each task, succeeded


def test_the_run_output_kept_in_memory_is_the_stored_one(tmp_path: Path) -> None:
    store, run_id, _ = _created(tmp_path)
    outcome = _execute(store, run_id)
    with store.read() as conn:
        stored = runs_repo.run_state(conn, run_id)[1]
    again = finished_outcome(store, run_id)
    store.close()
    assert again is not None
    assert outcome.output == again.output == json.loads(stored)
    assert list(outcome.output)[-2:] == ["unit", "join"]  # plan order
    items = outcome.output["join"]["output"]["items"]
    assert [item["output"]["output"]["i"] for item in items] == list(range(20))


def test_a_batch_whose_row_another_writer_changed_names_it_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store, run_id, db = _created(tmp_path)
    with sqlite3.connect(db) as conn:
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT task_id FROM tasks WHERE run_id = ? ORDER BY ordinal LIMIT 3", (run_id,)
            )
        ]
        conn.execute(
            "UPDATE tasks SET status = 'cancelled' WHERE run_id = ? AND task_id = ?",
            (run_id, ids[1]),
        )
    conn.close()
    changes: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((run_id, task_id), {"status": "running", "attempt": 1}) for task_id in ids
    ]
    with pytest.raises(StateConflictError, match=f"task {run_id}/{ids[1]} is cancelled"):
        with store.write() as conn:
            guarded_updates(conn, "task", changes)
    with sqlite3.connect(db) as conn:
        statuses = dict(
            conn.execute(
                "SELECT task_id, status FROM tasks WHERE run_id = ? AND task_id IN (?, ?, ?)",
                (run_id, *ids),
            ).fetchall()
        )
    conn.close()
    store.close()
    assert statuses == {ids[0]: "pending", ids[1]: "cancelled", ids[2]: "pending"}


KILLED_IN_A_FLUSH = """
import asyncio, os, signal, sys
from agentctl.engine.run.executor import RunExecutor
from agentctl.ids import SystemClock
from agentctl.store import audit_repo
from agentctl.store.engine import open_store

calls = 0
insert = audit_repo.insert_event_rows


def killing(conn, rows):
    # The second batch: its task rows and checkpoints are executed, its events not yet,
    # nothing of it committed.
    global calls
    calls += 1
    if calls == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    insert(conn, rows)


audit_repo.insert_event_rows = killing
store = open_store(sys.argv[1])
asyncio.run(RunExecutor(store, sys.argv[2], clock=SystemClock()).execute())
"""


def test_a_kill_inside_a_batchs_statements_loses_and_repeats_nothing(tmp_path: Path) -> None:
    store, run_id, db = _created(tmp_path)
    store.close()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_FLUSH, str(db), run_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    with sqlite3.connect(db) as conn:
        done = conn.execute(
            "SELECT count(*) FROM tasks WHERE run_id = ? AND status = 'succeeded'", (run_id,)
        ).fetchone()[0]
    conn.close()
    assert done == 8  # the first batch (maxConcurrency 8) only: the second left nothing

    with open_store(str(db)) as again:
        outcome = _execute(again, run_id)
        assert outcome.state == "succeeded"
        with again.read() as conn:
            report = verify_chain(conn, run_id)
    assert report.ok
    with sqlite3.connect(db) as conn:
        per_task = conn.execute(
            "SELECT task_id, count(*) FROM audit_events WHERE run_id = ? AND kind = ? "
            "GROUP BY task_id",
            (run_id, "task.succeeded"),
        ).fetchall()
        transitions = conn.execute(
            "SELECT count(*), count(DISTINCT transition) FROM checkpoints WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        attempts = {row[0] for row in conn.execute("SELECT attempt FROM tasks")}
    conn.close()
    assert len(per_task) == 22 and {count for _, count in per_task} == {1}
    assert transitions == (22, 22)  # one checkpoint per task, none written twice
    assert attempts == {1}  # the tasks of the lost batch ran again as their first attempt
    items = outcome.output["join"]["output"]["items"]
    assert [item["output"]["output"]["i"] for item in items] == list(range(20))


def test_outputs_encoded_by_reusing_parts_are_the_canonical_records(tmp_path: Path) -> None:
    """The attempt encodes an output reusing the texts it already has (the rendered input
    inside an assign's output, the children's outputs inside the aggregate, the join's
    input inside its output): every stored output, digest and input digest is still the
    canonical one of the value it records."""
    from agentctl.digest import canonical_json, digest_json, sha256_hex

    store, run_id, db = _created(tmp_path)
    assert _execute(store, run_id).state == "succeeded"
    store.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT task_id, output_json, output_digest, input_digest FROM tasks WHERE run_id = ?",
            (run_id,),
        ).fetchall()
    assert len(rows) == 22  # 20 children, their aggregate, the join
    by_id = {task_id: (text, digest, inputs) for task_id, text, digest, inputs in rows}
    for text, digest, input_digest in by_id.values():
        output = json.loads(text)
        assert text == canonical_json(output)
        assert digest == "sha256:" + sha256_hex(text.encode())
        if "output" in output:  # an assign: its input is its output
            assert input_digest == digest_json(output["output"])
    aggregate = json.loads(by_id["unit"][0])
    assert [item["output"] for item in aggregate["items"]] == [
        json.loads(by_id[item["taskId"]][0]) for item in aggregate["items"]
    ]
    assert json.loads(by_id["join"][0])["output"] == {"items": aggregate["items"]}
