"""Audit lanes, stated over any interleaving (docs/durable-execution.md, "Audit lanes"),
on a real SQLite file through the real functions: ``ClaimLane`` (a claim holder's
appends, each in a write transaction that commits or rolls back), claims finished or
taken again, and the owner's ``adopt_lanes`` at any point.

- the chain verifies after every adoption, and no adopted lane is left behind;
- it holds exactly the lane events that committed, each once, a lane's events together
  and in their lane order; a rolled-back append leaves nothing and breaks nothing;
- a live claim's lane is never adopted (its holder may still append).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.ids import FixedClock, IdGenerator
from agentctl.observability import audit_lanes
from agentctl.observability.audit import list_events, verify_chain
from agentctl.store import task_claims_repo
from agentctl.store.engine import Store, open_store

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: lanes}
spec:
  tasks:
    - {id: t, uses: "action:noop"}
  actions:
    noop: {kind: builtin.assign}
"""
TASKS = ("a", "b", "c")
NOW = datetime(2030, 1, 1, tzinfo=UTC)


class _RolledBack(Exception):
    pass


@pytest.fixture(scope="module")
def lane_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("lanes")
    (root / "wf.yaml").write_text(WORKFLOW)
    store = open_store(str(root / "db.sqlite"))
    yield store, root
    store.close()


def _new_run(store: Store, root: Path) -> str:
    prepared = prepare_run(str(root / "wf.yaml"), workspace=str(root))
    clock = FixedClock(NOW)
    run_id = create_run(store, prepared, clock=clock, ids=IdGenerator(clock))
    with store.write() as conn:
        published = [task_claims_repo.Published(t, "basis", "{}") for t in TASKS]
        task_claims_repo.publish(conn, run_id, published, NOW)
        conn.exec_driver_sql(
            "UPDATE task_claims SET state = 'claimed', token = 1 WHERE run_id = ?", (run_id,)
        )
    return run_id


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(TASKS), st.booleans()),
        st.tuples(st.just("reclaim"), st.sampled_from(TASKS), st.just(False)),
        st.tuples(st.just("finish"), st.sampled_from(TASKS), st.just(False)),
        st.tuples(st.just("adopt"), st.just(""), st.just(False)),
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_adopted_chains_hold_exactly_the_committed_lane_events_in_lane_order(
    lane_store: Any, ops: list[tuple[str, str, bool]]
) -> None:
    store, root = lane_store
    run_id = _new_run(store, root)
    claims = {t: [1, "claimed"] for t in TASKS}
    lanes: dict[tuple[str, int], audit_lanes.ClaimLane] = {}
    committed: dict[tuple[str, int], list[int]] = {}
    adopted: set[tuple[str, int]] = set()
    count = 0

    def set_claim(task: str) -> None:
        token, state = claims[task]
        with store.write() as conn:
            conn.exec_driver_sql(
                "UPDATE task_claims SET token = ?, state = ? WHERE run_id = ? AND task_id = ?",
                (token, state, run_id, task),
            )

    def adopt() -> None:
        with store.write() as conn:
            audit_lanes.adopt_lanes(conn, run_id)
        for key in committed:
            if claims[key[0]] != [key[1], "claimed"]:
                adopted.add(key)
        with store.read() as conn:
            assert verify_chain(conn, run_id).ok
            pending = {(r.task_id, r.claim_token) for r in audit_lanes.pending_events(conn, run_id)}
        assert not pending & adopted  # nothing adopted is left behind
        live = {(t, c[0]) for t, c in claims.items() if c[1] == "claimed"}
        assert pending <= live  # only live claims' lanes wait

    for op, task, rollback in ops:
        if op == "append" and claims[task][1] == "claimed":
            key = (task, int(claims[task][0]))
            lane = lanes.setdefault(key, audit_lanes.ClaimLane(run_id, task, key[1]))
            count += 1
            when = NOW + timedelta(milliseconds=count)
            try:
                with lane.transaction(), store.write() as conn:
                    lane.append(conn, "test.event", {"n": count}, now=when, effect_id=None)
                    if rollback:
                        raise _RolledBack
            except _RolledBack:
                continue
            committed.setdefault(key, []).append(count)
        elif op == "reclaim":
            claims[task] = [int(claims[task][0]) + 1, "claimed"]
            set_claim(task)
        elif op == "finish":
            claims[task][1] = "done"
            set_claim(task)
        elif op == "adopt":
            adopt()
    for task in TASKS:
        claims[task][1] = "done"
        set_claim(task)
    adopt()

    with store.read() as conn:
        chained = [e for e in list_events(conn, run_id) if e.kind == "test.event"]
        assert audit_lanes.pending_events(conn, run_id) == []
    order = [int(e.payload["n"]) for e in chained]
    assert sorted(order) == sorted(n for ns in committed.values() for n in ns)  # each once
    owner = {n: key for key, ns in committed.items() for n in ns}
    for key, ns in committed.items():
        positions = [i for i, n in enumerate(order) if owner[n] == key]
        assert [order[i] for i in positions] == ns  # in lane order
        assert positions == list(range(positions[0], positions[0] + len(ns)))  # together
        assert {e.task_id for e in chained if owner[int(e.payload["n"])] == key} == {key[0]}
