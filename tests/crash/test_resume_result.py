"""A run that returns every task's output returns the same result after a kill and resume.

Resuming reads the outputs recorded before the kill back from the database in one query
and parses them all at once (``TaskOutputs.every``); the tasks that ran in the resuming
process are kept in memory. Whatever the chain's length, the outputs' values and where the
kill fell, the result — the value ``resume`` prints and the canonical text stored on the
run — is the one an uninterrupted run of the same workflow records.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl import Runtime
from agentctl.digest import canonical_json
from agentctl.store import runs_repo
from agentctl.store.engine import open_store
from tests.crash.cli import cli, result_json

pytestmark = pytest.mark.crash

#: Text a workflow file can carry (YAML refuses surrogates and raw control characters;
#: JSON's own escapes of quotes, backslashes and newlines are in).
_text = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Co", "Cn")) | st.sampled_from('\n\t"\\'),
    max_size=12,
)

#: What a step may return: any JSON value (floats, unicode, nested objects and lists).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=8,
)


def _chain(values: list[Any]) -> str:
    lines = [
        "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: resume-result}\n"
        "spec:\n  policy: {approval: never}\n  actions:\n    step: {kind: builtin.assign}\n"
        "  tasks:\n"
    ]
    for i, value in enumerate(values):
        needs = f", needs: [s{i - 1}]" if i else ""
        # JSON is YAML flow syntax: each step returns {v: value} exactly.
        with_ = json.dumps({"v": value}, ensure_ascii=False)
        lines.append(f"    - {{id: s{i}, uses: 'action:step', with: {with_}{needs}}}\n")
    return "".join(lines)


def _stored(ws: Path) -> tuple[str, str | None]:
    """The run's id and its result's text as every reader gets it. A finished run of these
    workflows (no declared ``outputs:``) stores a reference to its task rows, not a copy."""
    with sqlite3.connect(ws / "runs.db") as conn:
        run_id, copy, source = conn.execute(
            "SELECT id, output_json, output_source FROM runs"
        ).fetchone()
    conn.close()
    if source is None:
        return run_id, copy
    assert (copy, source) == (None, "tasks")
    with open_store(str(ws / "runs.db")) as store, store.read() as read:
        return run_id, runs_repo.run_state(read, run_id)[1]


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=st.lists(json_values, min_size=2, max_size=16), data=st.data())
def test_a_resumed_run_returns_what_an_uninterrupted_one_does(
    tmp_path_factory: pytest.TempPathFactory, values: list[Any], data: st.DataObject
) -> None:
    killed_after = data.draw(st.integers(min_value=1, max_value=len(values) - 1), "killed_after")
    text = _chain(values)
    whole, crashed = tmp_path_factory.mktemp("whole"), tmp_path_factory.mktemp("crashed")
    for ws in (whole, crashed):
        (ws / "wf.yaml").write_text(text)

    rolled = cli(["roll", "wf.yaml", "--db", "runs.db"], whole)
    assert rolled.returncode == 0, rolled.stderr
    expected = result_json(rolled)["data"]["output"]

    killed = cli(
        ["roll", "wf.yaml", "--db", "runs.db"],
        crashed,
        {"AGENTCTL_FAULT": f"task.committed:{killed_after}"},
    )
    assert killed.returncode == -9, killed.stderr
    run_id, left = _stored(crashed)
    assert left is None  # killed before the run ended
    # The same killed database resumed twice: by the command (which shows progress, so it
    # reads every row first) and by the Python API (which reads the recorded outputs back
    # only to assemble the result).
    api = tmp_path_factory.mktemp("api")
    for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
        if (crashed / name).exists():
            shutil.copyfile(crashed / name, api / name)
    resumed = cli(["resume", run_id, "--db", "runs.db"], crashed)
    assert resumed.returncode == 0, resumed.stderr
    by_api = Runtime(api / "runs.db").resume(run_id)

    assert result_json(resumed)["data"]["output"] == expected
    assert (by_api.state, by_api.output) == ("succeeded", expected)
    assert _stored(crashed)[1] == _stored(api)[1] == _stored(whole)[1] == canonical_json(expected)
    assert expected == {f"s{i}": _step_output(value) for i, value in enumerate(values)}


def test_a_resumed_run_reads_sealed_outputs_back_into_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Encryption enabled on the killed database: every recorded output is sealed, so the
    # read-back opens each one in its own record (not the clear texts' one-pass path).
    values: list[Any] = [{"n": i, "text": f"value {i} é"} for i in range(30)]
    whole, crashed = tmp_path / "whole", tmp_path / "crashed"
    for ws in (whole, crashed):
        ws.mkdir()
        (ws / "wf.yaml").write_text(_chain(values))
    assert cli(["roll", "wf.yaml", "--db", "runs.db"], whole).returncode == 0
    killed = cli(
        ["roll", "wf.yaml", "--db", "runs.db"], crashed, {"AGENTCTL_FAULT": "task.committed:12"}
    )
    assert killed.returncode == -9, killed.stderr
    run_id, _ = _stored(crashed)
    monkeypatch.setenv("K1", base64.b64encode(os.urandom(32)).decode())
    enable = ["db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1"]
    enabled = cli([*enable, "--db", "runs.db"], crashed)
    assert enabled.returncode == 0, enabled.stderr
    with sqlite3.connect(crashed / "runs.db") as conn:
        sealed = conn.execute("SELECT count(*) FROM tasks WHERE typeof(output_json) = 'blob'")
        assert sealed.fetchone() == (12,)
    conn.close()

    resumed = Runtime(crashed / "runs.db").resume(run_id)

    assert resumed.output == {f"s{i}": _step_output(value) for i, value in enumerate(values)}
    # The stored result (sealed now) reads back as the uninterrupted run's does.
    stored = Runtime(crashed / "runs.db").resume(run_id).output
    assert stored == Runtime(whole / "runs.db").resume(_stored(whole)[0]).output == resumed.output


def _step_output(value: Any) -> Any:
    """What ``builtin.assign`` records for ``with: {v: value}`` (its output record)."""
    return {
        "after": {"v": value},
        "before": None,
        "changed": False,
        "diff": None,
        "output": {"v": value},
        "predictability": "fully_predictable",
        "status": "unchanged",
    }
