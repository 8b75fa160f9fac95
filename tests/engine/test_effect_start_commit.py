"""One durable commit before an ungated effect's dispatch (docs/durable-execution.md, "The
effect protocol").

An effect that needs no approval is journaled ``started`` in the transaction that journals
it, and dispatched after that one commit; one that needs approval is journaled
``requested``, waits for its approval, and moves to ``started`` in a commit of its own
before its dispatch. Real runs on real SQLite files: every statement each connection of
the store runs is traced (SQLite's own trace, ``COMMIT`` included), and each dispatch
looks at what is committed at that moment through a connection of its own.
"""

from __future__ import annotations

import sqlite3
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl import Runtime
from agentctl.compiler.effects import approval_required, kind_effect

ACTIONS = {
    # kind: the action's definition and the `with:` of a task using it (n: its index)
    "builtin.write": ("{kind: builtin.write}", "{path: out/f{n}.txt, content: v{n}}"),
    "builtin.shell.exec": (
        '{kind: builtin.shell.exec, command: sh, args: ["-c", "echo {n} >> ledger.txt"]}',
        None,
    ),
    "builtin.memory.write": ("{kind: builtin.memory.write}", "{key: k{n}, value: v{n}}"),
}


def _workflow(mode: str, kinds: list[str]) -> str:
    actions, tasks = [], []
    for n, kind in enumerate(kinds):
        definition, given_with = ACTIONS[kind]
        actions.append(f"    a{n}: {definition.replace('{n}', str(n))}")
        task = f"    - {{id: t{n}, uses: 'action:a{n}'"
        if given_with is not None:
            task += f", with: {given_with.replace('{n}', str(n))}"
        if n:
            task += f", needs: [t{n - 1}]"
        tasks.append(task + "}")
    return (
        textwrap.dedent(
            f"""\
        apiVersion: agentctl.dev/v1
        kind: Workflow
        metadata: {{name: start-commit}}
        spec:
          policy: {{approval: {mode}, processAllowlist: [sh], writableRoots: [out]}}
          actions:
        """
        )
        + "\n".join(["  " + a for a in actions] + ["  tasks:"] + ["  " + t for t in tasks])
        + "\n"
    )


@dataclass
class Dispatch:
    """One dispatch as it began: the effect's committed row and what the store ran before."""

    effect_id: str
    committed_status: str
    approved: bool  # an approval record for it is committed
    commits_since_journal: int  # COMMITs since the INSERT that journaled it
    journaled_as: str  # the status its INSERT wrote


@dataclass
class Trace:
    db: Path
    statements: list[str] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)

    def dispatched(self, effect_id: str) -> None:
        inserts = [i for i, s in enumerate(self.statements) if effect_id in s and "INSERT" in s]
        (journal,) = [i for i in inserts if s_is_effect_insert(self.statements[i])]
        text = self.statements[journal]
        commits = sum(1 for s in self.statements[journal:] if s.strip().upper() == "COMMIT")
        with sqlite3.connect(self.db) as look:
            (status,) = look.execute("SELECT status FROM effects WHERE id = ?", (effect_id,))
            approvals = look.execute(
                "SELECT status FROM approvals WHERE effect_id = ?", (effect_id,)
            ).fetchall()
        look.close()
        self.dispatches.append(
            Dispatch(
                effect_id,
                status[0],
                approvals == [("approved",)],
                commits,
                "started" if "'started'" in text else "requested",
            )
        )


def s_is_effect_insert(statement: str) -> bool:
    return statement.lstrip().upper().startswith("INSERT INTO EFFECTS")


@contextmanager
def traced(monkeypatch: pytest.MonkeyPatch, db: Path) -> Iterator[Trace]:
    """Every statement the store's SQLite connections run, and each dispatch's view."""
    import agentctl.engine.effects.gate as gate_module
    import agentctl.store.engine as engine_module
    import agentctl.store.sqlite_connections as connections_module

    trace = Trace(db)
    connect, dispatch = connections_module.connect, gate_module.traced_dispatch

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(trace.statements.append)
        return conn

    async def traced_dispatch(spec: Any, call: Any, effect_id: str) -> Any:
        trace.dispatched(effect_id)
        return await dispatch(spec, call, effect_id)

    with monkeypatch.context() as patch:
        patch.setattr(engine_module, "connect", traced_connect)
        patch.setattr(connections_module, "connect", traced_connect)
        patch.setattr(gate_module, "traced_dispatch", traced_dispatch)
        yield trace


def _roll(tmp: Path, mode: str, kinds: list[str], approve: bool | None = None) -> Any:
    """Roll the workflow of these effects in a fresh workspace and database (the store
    opened inside the caller's trace); ``approve``: the terminal's answer to each ask."""
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(_workflow(mode, kinds))

    async def approver(_request: Any) -> bool:
        assert approve is not None
        return approve

    runtime = Runtime(tmp / "r.db", approver=None if approve is None else approver)
    return runtime.roll(ws / "wf.yaml", workspace=ws)


def test_an_ungated_effect_commits_once_before_its_dispatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's transaction writes the effect ``started``; nothing else commits
    before the dispatch (it was two commits: ``requested``, then ``started``)."""
    with traced(monkeypatch, tmp_path / "r.db") as trace:
        result = _roll(tmp_path, "never", ["builtin.shell.exec"])
    assert result.state == "succeeded", result
    (dispatch,) = trace.dispatches
    assert dispatch.journaled_as == "started"
    assert dispatch.committed_status == "started"
    assert dispatch.commits_since_journal == 1
    # No statement ever moves it to started: the insert did.
    moves = [s for s in trace.statements if s.startswith("UPDATE effects SET status='started'")]
    assert moves == []
    with sqlite3.connect(tmp_path / "r.db") as conn:
        (row,) = conn.execute("SELECT status, started_at, requested_at FROM effects").fetchall()
        kinds = [k for (k,) in conn.execute("SELECT kind FROM audit_events ORDER BY seq")]
    conn.close()
    assert row[0] == "succeeded" and row[1] == row[2]  # started as it was journaled
    assert kinds.count("effect.requested") == 1 and kinds.count("effect.succeeded") == 1


def test_a_budget_refusal_in_the_journal_transaction_leaves_no_start_time(
    tmp_path: Path,
) -> None:
    """Refused by its budget in the transaction that journaled it ``started``: concluded
    ``failed``, never dispatched, and without a start time."""
    ws = tmp_path / "ws"
    ws.mkdir()
    text = _workflow("never", ["builtin.shell.exec"]).replace(
        "spec:\n", "spec:\n  runtime: {budgets: {maxProcessOutputBytes: 1}}\n"
    )
    (ws / "wf.yaml").write_text(text)
    result = Runtime(tmp_path / "r.db").roll(ws / "wf.yaml", workspace=ws)
    assert result.state == "failed", result
    assert not (ws / "ledger.txt").exists()
    with sqlite3.connect(tmp_path / "r.db") as conn:
        rows = conn.execute("SELECT status, started_at, finished_at FROM effects").fetchall()
    conn.close()
    ((status, started_at, finished_at),) = rows
    assert status == "failed" and started_at is None and finished_at is not None


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    mode=st.sampled_from(["never", "mutations", "high_risk", "always"]),
    kinds=st.lists(st.sampled_from(sorted(ACTIONS)), min_size=1, max_size=3),
    approve=st.booleans(),
)
def test_every_dispatch_follows_a_committed_started_row(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    kinds: list[str],
    approve: bool,
) -> None:
    """For any approval mode and effects: an effect is dispatched only once its row is
    committed ``started``; an ungated one was journaled so, with no other commit before
    its dispatch; a gated one was journaled ``requested`` and dispatched only after its
    approval committed (a rejected one never is)."""
    tmp = tmp_path_factory.mktemp("start")
    with traced(monkeypatch, tmp / "r.db") as trace:
        result = _roll(tmp, mode, kinds, approve)
    gated = [
        approval_required(mode, kind_effect(k).effect_class, kind_effect(k).risk) for k in kinds
    ]
    # Effects run in task order; the first rejected one stops the run.
    expected = []
    for is_gated in gated:
        if is_gated and not approve:
            break
        expected.append(is_gated)
    assert [d.approved for d in trace.dispatches] == expected
    for dispatch, is_gated in zip(trace.dispatches, expected, strict=True):
        assert dispatch.committed_status == "started"
        if is_gated:
            assert dispatch.journaled_as == "requested"
            assert dispatch.commits_since_journal >= 2  # requested, then approved+started
        else:
            assert dispatch.journaled_as == "started"
            assert dispatch.commits_since_journal == 1
    assert result.state == ("succeeded" if len(expected) == len(kinds) else "failed"), result


def test_a_gated_effect_found_requested_follows_its_recorded_approval(tmp_path: Path) -> None:
    """A gated effect left ``requested`` after its approval was recorded (answered at the
    terminal, which commits before the move to ``started``) is dispatched once on resume
    as that approval says, not asked for a second time."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "wf.yaml").write_text(_workflow("always", ["builtin.shell.exec"]))
    runtime = Runtime(tmp_path / "r.db")
    parked = runtime.roll(ws / "wf.yaml", workspace=ws)
    assert parked.state == "paused", parked
    (approval,) = parked.pending_approvals
    runtime.approve(approval, reason="ok")
    with sqlite3.connect(tmp_path / "r.db") as conn:  # as the terminal's answer leaves it
        conn.execute("UPDATE effects SET status = 'requested'")
    conn.close()
    resumed = runtime.resume(parked.run_id)
    assert resumed.state == "succeeded", resumed
    assert (ws / "ledger.txt").read_text().split() == ["0"]
    with sqlite3.connect(tmp_path / "r.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM approvals").fetchone() == (1,)
    conn.close()
