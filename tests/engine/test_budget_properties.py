"""The ledger's rules, stated over any sequence of reserve / settle / fail / uncertain /
reconcile (docs/budgets.md), against a real SQLite file through the real functions: the
gate's ``budget.reserve`` and ``budget.settle``, and ``journal.add_reconciliation`` (the one
way a conclusion is appended).

- reserved + used never exceeds a limit, unless an operator overturned ``not_applied`` with
  a conclusion that the effect did consume (a fact about the world, counted as such);
- an effect that is concluded holds no reservation;
- the ledger equals what the effects account for: reserved is what is still held, used is
  what was settled plus what consuming conclusions counted.

``AGENTCTL_SOAK=1`` draws many more sequences.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentctl import amounts
from agentctl.engine.effects import budget, journal
from agentctl.engine.run.creation import create_run, prepare_run
from agentctl.ids import FixedClock, IdGenerator
from agentctl.store import budget_repo
from agentctl.store.engine import Store, StoreSettings, open_store

SOAK = os.environ.get("AGENTCTL_SOAK") == "1"
LIMITS = {"processOutputBytes": 1000.0, "toolCalls": 4.0}
WORKFLOW = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: ledger}
spec:
  runtime: {budgets: {maxProcessOutputBytes: 1000, maxToolCalls: 4}}
  tasks:
    - {id: t, uses: "action:noop"}
  actions:
    noop: {kind: builtin.assign}
"""
CONCLUSIONS = ("applied", "not_applied", "compensated")


class LedgerMachine(RuleBasedStateMachine):
    #: One migrated database for every sequence (``test_ledger_sequences`` opens it); each
    #: sequence works on a run of its own, with a ledger of its own.
    store: Store
    workflow: Path

    def __init__(self) -> None:
        super().__init__()
        self.clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
        self.run_id = create_run(
            self.store,
            prepare_run(str(self.workflow)),
            clock=self.clock,
            ids=IdGenerator(self.clock),
        )
        self.count = 0
        self.held: dict[str, dict[str, float]] = {}  # requested or started, reservation held
        self.uncertain: dict[str, dict[str, float]] = {}  # effect -> what it reserved
        self.conclusion: dict[str, str] = {}  # uncertain effect -> latest conclusion
        self.settled_used = dict.fromkeys(LIMITS, 0.0)
        self.overturned = False

    # -- the gate's side ---------------------------------------------------------------

    @rule(
        output=st.integers(0, 600),
        calls=st.integers(0, 2),
    )
    def reserve(self, output: int, calls: int) -> None:
        self.count += 1
        spec = journal.EffectSpec(
            operation="process",
            effect_input={"n": self.count},
            effect_class="mutation",
            idempotency="at_most_once",
            risk="low",
            policy_label="process",
        )
        units = {"processOutputBytes": float(output), "toolCalls": float(calls)}
        now = self.clock.now()
        with self.store.write() as conn:
            record = journal.insert_requested(
                conn,
                run_id=self.run_id,
                task_id="t",
                attempt=1,
                ordinal=self.count,
                spec=spec,
                now=now,
            )
            denied = budget.reserve(conn, self.run_id, record.id, units, now)
            if denied is not None:
                assert "e+" not in denied.message()
                journal.finish_effect(conn, record.id, status="failed", now=now, confirmed=True)
                return
        self.held[record.id] = {r: a for r, a in units.items() if a > 0}

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), fraction=st.floats(0, 1))
    def succeed(self, data: st.DataObject, fraction: float) -> None:
        effect = data.draw(st.sampled_from(list(self.held)))
        reserved = self.held.pop(effect)
        actual = {r: float(int(a * fraction)) for r, a in reserved.items()}
        now = self.clock.now()
        with self.store.write() as conn:
            journal.set_status(conn, effect, "started", now)
            journal.finish_effect(conn, effect, status="succeeded", now=now, confirmed=True)
            assert budget.settle(conn, self.run_id, effect, actual, now) == []
        for resource, amount in actual.items():
            self.settled_used[resource] += amount

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        effect = data.draw(st.sampled_from(list(self.held)))
        del self.held[effect]
        now = self.clock.now()
        with self.store.write() as conn:
            journal.set_status(conn, effect, "started", now)
            journal.finish_effect(conn, effect, status="failed", now=now, confirmed=True)
            budget.settle(conn, self.run_id, effect, {}, now)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), crashed=st.booleans())
    def lose_the_outcome(self, data: st.DataObject, crashed: bool) -> None:
        """A crash after dispatch (stays ``started``) or a timeout (``uncertain``)."""
        effect = data.draw(st.sampled_from(list(self.held)))
        self.uncertain[effect] = self.held.pop(effect)
        now = self.clock.now()
        with self.store.write() as conn:
            journal.set_status(conn, effect, "started", now)
            if not crashed:
                journal.finish_effect(conn, effect, status="uncertain", now=now, confirmed=False)

    # -- the operator's side -----------------------------------------------------------

    @precondition(lambda self: bool(self.uncertain))
    @rule(data=st.data(), status=st.sampled_from(CONCLUSIONS))
    def reconcile(self, data: st.DataObject, status: str) -> None:
        effect = data.draw(st.sampled_from(list(self.uncertain)))
        before = self.conclusion.get(effect)
        if before == "not_applied" and status != "not_applied":
            self.overturned = True
        with self.store.write() as conn:
            journal.add_reconciliation(
                conn,
                effect,
                status=status,  # type: ignore[arg-type]
                reason="checked",
                actor="test",
                now=self.clock.now(),
                result={"stdout": ""} if status == "applied" else None,
            )
        self.conclusion[effect] = status

    # -- the rules -----------------------------------------------------------------------

    def _ledger(self) -> dict[str, budget_repo.LedgerRow]:
        with self.store.read() as conn:
            return budget_repo.ledger(conn, self.run_id)

    @invariant()
    def ledger_matches_the_effects(self) -> None:
        ledger = self._ledger()
        for resource, limit in LIMITS.items():
            row = ledger[resource]
            still_held = sum(
                units.get(resource, 0.0)
                for effect, units in [*self.held.items(), *self.uncertain.items()]
                if effect not in self.conclusion
            )
            counted = sum(
                self.uncertain[effect].get(resource, 0.0)
                for effect, status in self.conclusion.items()
                if status != "not_applied"
            )
            assert row.limit_units == limit
            assert row.reserved_units == pytest.approx(still_held)
            assert row.used_units == pytest.approx(self.settled_used[resource] + counted)
            if not self.overturned:
                assert row.reserved_units + row.used_units <= limit

    @invariant()
    def a_concluded_effect_holds_no_reservation(self) -> None:
        with self.store.read() as conn:
            for effect in self.conclusion:
                assert budget_repo.held_reservations(conn, effect) == []


def test_ledger_sequences(tmp_path: Path) -> None:
    LedgerMachine.workflow = tmp_path / "wf.yaml"
    LedgerMachine.workflow.write_text(WORKFLOW)
    with open_store(str(tmp_path / "r.db"), settings=StoreSettings(synchronous="OFF")) as store:
        LedgerMachine.store = store
        run_state_machine_as_test(
            LedgerMachine,
            settings=settings(
                max_examples=400 if SOAK else 30,
                stateful_step_count=40 if SOAK else 15,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )


RESOURCES = sorted({*budget.LIMIT_RESOURCES.values(), *budget.COUNTERS, "wallTimeSeconds"})


@settings(max_examples=2000 if SOAK else 200, deadline=None)
@given(
    resource=st.sampled_from(RESOURCES),
    units=st.one_of(
        st.integers(0, 10**15).map(float),
        st.floats(0, 1e15, allow_nan=False, allow_infinity=False),
    ),
)
def test_amounts_are_never_in_scientific_notation(resource: str, units: float) -> None:
    text = amounts.amount(resource, units)
    assert "e+" not in text and "e-" not in text and "inf" not in text
    if resource == "costMicrousd":
        assert text.startswith("$")
    else:
        assert text.split(" ", 1)[0].replace(",", "").replace(".", "").isdigit()


@pytest.mark.parametrize(
    ("resource", "units", "shown"),
    [
        ("processOutputBytes", 1_500_000, "1,500,000 bytes"),
        ("artifactBytes", 1, "1 byte"),
        ("inputTokens", 2_000_000, "2,000,000 tokens"),
        ("costMicrousd", 2_000_000, "$2.00"),
        ("costMicrousd", 1_234, "$0.001234"),
        ("costMicrousd", 2_500_000, "$2.50"),
        ("providerRequests", 1, "1 request"),
        ("toolCalls", 3, "3 tool calls"),
        ("turns", 0, "0 turns"),
        ("wallTimeSeconds", 90, "90 seconds"),
        ("processOutputBytes", None, "unlimited"),
    ],
)
def test_amounts_are_shown_in_their_units(resource: str, units: float | None, shown: str) -> None:
    assert amounts.amount(resource, units) == shown


def test_the_run_summary_shows_tokens_and_cost_with_the_same_formatter() -> None:
    from agentctl.runtime_records import RunTotals

    text = RunTotals.from_json(
        {
            "state": "succeeded",
            "durationSeconds": 1.0,
            "tasks": {"done": 1, "total": 1, "failed": 0},
            "effects": 1,
            "tokens": 1_234_567,
            "costUsd": 18 / 1_000_000,  # 18 micro-USD: "$0.0000" before
        }
    ).text()
    assert text.endswith("1,234,567 tokens, $0.000018")
