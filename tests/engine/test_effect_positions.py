"""One effect per position of an attempt (docs/durable-execution.md, "Identities"), on a
real SQLite store: the same request found at its position is the journaled effect (also
under an id an older release derived), a different request there is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentctl.engine.effects import journal
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.ids import FixedClock, IdGenerator
from agentctl.signals import TaskFailure
from agentctl.store import effects_repo
from agentctl.store.engine import open_store
from agentctl.store.states import EffectState

WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: positions}
spec:
  actions: {set: {kind: builtin.assign}}
  tasks: [{id: t, uses: "action:set"}]
"""


def _spec(effect_input: Any) -> journal.EffectSpec:
    return journal.EffectSpec(
        operation="process",
        effect_input=effect_input,
        effect_class="mutation",
        idempotency="at_most_once",
        risk="low",
        policy_label="process",
    )


@pytest.fixture
def store_and_run(tmp_path: Path) -> Any:
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(WORKFLOW)
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    with open_store(str(tmp_path / "r.db")) as store:
        run_id = create_run(store, prepare_run(str(workflow)), clock=clock, ids=IdGenerator(clock))
        yield store, run_id, clock.now()


def _insert(store: Any, run_id: str, spec: journal.EffectSpec, now: Any) -> journal.EffectRecord:
    with store.write() as conn:
        return journal.insert_requested(
            conn, run_id=run_id, task_id="t", attempt=1, ordinal=1, spec=spec, now=now
        )


def test_the_same_request_in_another_key_order_is_the_journaled_effect(store_and_run: Any) -> None:
    store, run_id, now = store_and_run
    first = _insert(store, run_id, _spec({"zeta": 1, "alpha": {"y": 2.0, "b": 3}}), now)
    again = _insert(store, run_id, _spec({"alpha": {"b": 3, "y": 2}, "zeta": 1}), now)
    assert again.id == first.id
    with store.read() as conn:
        assert len(effects_repo.effects(conn, run_id)) == 1


def test_an_effect_under_an_older_id_is_found_by_its_position_and_request(
    store_and_run: Any,
) -> None:
    store, run_id, now = store_and_run
    spec = _spec({"zeta": 1, "alpha": 2})
    old_id = "0" * 64  # what a release that hashed the build order may have derived
    with store.write() as conn:
        effects_repo.insert_effect(
            conn,
            effects_repo.EffectRecord(
                id=old_id,
                run_id=run_id,
                task_id="t",
                attempt=1,
                ordinal=1,
                operation=spec.operation,
                input_digest="legacy",
                effect_class=spec.effect_class,
                idempotency=spec.idempotency,
                risk=spec.risk,
                idempotency_key=old_id,
                status=EffectState.REQUESTED,
                confirmed=False,
                request={"alpha": 2, "zeta": 1},
                result=None,
                error=None,
                requested_at=now,
                started_at=None,
                finished_at=None,
            ),
        )
    assert _insert(store, run_id, spec, now).id == old_id


def test_a_different_request_at_a_recorded_position_is_refused(store_and_run: Any) -> None:
    store, run_id, now = store_and_run
    first = _insert(store, run_id, _spec({"n": 1}), now)
    with pytest.raises(TaskFailure) as refused:
        _insert(store, run_id, _spec({"n": 2}), now)
    assert refused.value.code == "effect.nondeterministic"
    assert first.id in refused.value.message and refused.value.permanent
    with store.read() as conn:
        assert [e.id for e in effects_repo.effects(conn, run_id)] == [first.id]
