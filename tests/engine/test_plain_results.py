"""A run without declared ``outputs:`` stores a reference to its task rows, not a copy of
every output, and every reader gets the result the copy used to hold.

The oracle is the copy built the way earlier releases built it: every task row that has an
output, in plan order, parsed and written again as canonical JSON (``canonical_json`` of
the object by task id). The runs are real: the CLI in its own processes on a real SQLite
file; the readers are ``inspect`` and re-submitting the finished run (``resume``) as
commands, the Python API, and the repository reads the dashboard and the API build on.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agentctl import Runtime
from agentctl.digest import canonical_json
from agentctl.errors import PersistenceError
from agentctl.store import migrate, runs_repo
from agentctl.store.engine import open_store
from agentctl.store.run_tables import runs, tasks
from tests.forkserver import run_agentctl

_HEADER = (
    "apiVersion: agentctl.dev/v1\nkind: Workflow\nmetadata: {name: plain}\nspec:\n"
    "  inputs: {go: false}\n  runtime: {maxConcurrency: 4}\n  policy: {approval: never}\n"
    "  actions:\n    step: {kind: builtin.assign}\n  tasks:\n"
)

#: Text a workflow file can carry (YAML refuses surrogates and raw control characters).
_text = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Co", "Cn")) | st.sampled_from('\n\t"\\'),
    max_size=8,
)
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=6,
)


@st.composite
def _workflows(draw: st.DrawFn) -> str:
    """A workflow of steps that record a value, steps skipped by their ``when`` (which
    record their decision as output), fan-outs (children and an aggregate) and steps
    that wait on earlier ones; ids drawn so that plan order and key order differ."""
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True),
            min_size=1,
            max_size=8,
            unique=True,
        )
    )
    lines = [_HEADER]
    for index, name in enumerate(names):
        kind = draw(st.sampled_from(("value", "value", "skipped", "fanout")))
        needs = draw(st.lists(st.sampled_from(names[:index]), unique=True)) if index else []
        after = f", needs: {json.dumps(needs)}" if needs else ""
        value = json.dumps({"v": draw(_values)}, ensure_ascii=False)
        if kind == "value":
            lines.append(f"    - {{id: {name}, uses: 'action:step', with: {value}{after}}}\n")
        elif kind == "skipped":
            lines.append(
                f"    - {{id: {name}, uses: 'action:step', with: {value}{after},"
                ' when: "${{ inputs.go }}"}\n'
            )
        else:
            items = json.dumps(draw(st.lists(_values, max_size=3)), ensure_ascii=False)
            lines.append(
                f"    - {{id: {name}, uses: 'action:step', foreach: {{items: {items}}},"
                f" with: {{i: '${{{{ vars.item }}}}'}}{after}}}\n"
            )
    return "".join(lines)


def _agentctl(ws: Path, *args: str) -> Any:
    done = run_agentctl(["--output", "json", *args, "--db", "runs.db"], cwd=ws, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _old_copy(db: Path, run_id: str) -> str:
    """What earlier releases wrote into ``runs.output_json``: every recorded output, in
    plan order, as one canonical JSON object (clear rows only)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT task_id, output_json FROM tasks WHERE run_id = ? AND output_json IS NOT"
            " NULL ORDER BY ordinal",
            (run_id,),
        ).fetchall()
    conn.close()
    return canonical_json({task_id: json.loads(text) for task_id, text in rows})


def _row(db: Path, run_id: str) -> tuple[Any, Any]:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT output_json, output_source FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
    conn.close()
    return tuple(row)  # type: ignore[return-value]


def _read_back(ws: Path, run_id: str) -> dict[str, Any]:
    """The result as each reader returns it: ``(text or value, keys in order)``."""
    db = ws / "runs.db"
    with open_store(str(db)) as store, store.read() as conn:
        state_text = runs_repo.run_state(conn, run_id)[1]
        row_text = runs_repo.run(conn, run_id)["output_json"]
    inspected = _agentctl(ws, "inspect", run_id)["data"]["run"]["output"]
    resubmitted = _agentctl(ws, "resume", run_id)["data"]["output"]
    runtime = Runtime(db)
    return {
        "run_state": state_text,
        "run": row_text,
        "inspect": inspected,
        "resume": resubmitted,
        "api inspect": runtime.inspect(run_id).run["output"],
        "api resume": runtime.resume(run_id).output,
    }


def _check_readers(ws: Path, run_id: str, copy: str) -> None:
    read = _read_back(ws, run_id)
    # Text readers get the old copy byte for byte; value readers its value, keys as the
    # copy held them (sorted).
    assert read.pop("run_state") == read.pop("run") == copy
    expected = json.loads(copy)
    for reader, value in read.items():
        assert value == expected, reader
        assert list(value) == list(expected), reader


@settings(
    max_examples=int(os.environ.get("AGENTCTL_PLAIN_EXAMPLES", "6")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(workflow=_workflows())
def test_the_plain_result_read_back_is_the_copy_earlier_releases_stored(
    tmp_path_factory: pytest.TempPathFactory, workflow: str
) -> None:
    ws = tmp_path_factory.mktemp("plain")
    (ws / "wf.yaml").write_text(workflow)
    rolled = _agentctl(ws, "roll", "wf.yaml")["data"]
    run_id = rolled["runId"]
    assert rolled["state"] == "succeeded"
    assert _row(ws / "runs.db", run_id) == (None, "tasks")  # a reference, no copy
    copy = _old_copy(ws / "runs.db", run_id)
    # The finishing execution's own result: the same value, in plan order.
    assert rolled["output"] == json.loads(copy)
    with sqlite3.connect(ws / "runs.db") as conn:
        order = [r[0] for r in conn.execute("SELECT task_id FROM tasks ORDER BY ordinal")]
    conn.close()
    assert list(rolled["output"]) == [task_id for task_id in order if task_id in rolled["output"]]
    _check_readers(ws, run_id, copy)


_CHAIN = _HEADER + "".join(
    f"    - {{id: s{i}, uses: 'action:step', with: {{v: {{n: {i}, t: 'é {i}'}}}}"
    + (f", needs: [s{i - 1}]" if i else "")
    + "}\n"
    for i in range(12)
)


def test_a_run_with_declared_outputs_keeps_its_copy(tmp_path: Path) -> None:
    declared = "  outputs: {last: '${{ tasks.s11.output.output.v.n }}'}\n"
    text = _CHAIN.replace("  tasks:\n", declared + "  tasks:\n")
    (tmp_path / "wf.yaml").write_text(text)
    run_id = _agentctl(tmp_path, "roll", "wf.yaml")["data"]["runId"]
    assert _row(tmp_path / "runs.db", run_id) == ('{"last":11}', None)
    assert _agentctl(tmp_path, "inspect", run_id)["data"]["run"]["output"] == {"last": 11}


def test_the_migration_keeps_old_copies_and_downgrade_writes_them_back(tmp_path: Path) -> None:
    """A database at 0014 (its runs hold copies) reads the same after the upgrade to 0015;
    runs finished at 0015 store references, and a downgrade writes their copies back."""
    (tmp_path / "wf.yaml").write_text(_CHAIN)
    db = tmp_path / "runs.db"
    old_run = _agentctl(tmp_path, "roll", "wf.yaml")["data"]["runId"]
    copy = _old_copy(db, old_run)
    with open_store(str(db)) as store, store.write() as conn:
        migrate.downgrade(conn, "0014_sealed_bytes")
    with sqlite3.connect(db) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
        (stored,) = conn.execute("SELECT output_json FROM runs").fetchone()
        tasks = conn.execute("SELECT count(*) FROM tasks").fetchone()
    conn.close()
    # At 0014 the run row holds the copy, as that release wrote it, and nothing else went.
    assert "output_source" not in columns and stored == copy and tasks == (12,)

    new_run = _agentctl(tmp_path, "roll", "wf.yaml")["data"]["runId"]  # upgrades on open
    with open_store(str(db)) as store:
        assert store.revision() == migrate.head_revision()
    assert _row(db, old_run) == (copy, None)  # kept as it was
    assert _row(db, new_run) == (None, "tasks")
    _check_readers(tmp_path, old_run, copy)
    _check_readers(tmp_path, new_run, _old_copy(db, new_run))


def test_downgrade_seals_the_copy_of_sealed_outputs_and_needs_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encryption on: the copy a downgrade writes back is sealed under the run row, and
    opens to the old copy; without the key the downgrade stops and changes nothing."""
    monkeypatch.setenv("K1", base64.b64encode(os.urandom(32)).decode())
    clear, sealed = tmp_path / "clear", tmp_path / "sealed"
    for ws in (clear, sealed):
        ws.mkdir()
        (ws / "wf.yaml").write_text(_CHAIN)
    db = sealed / "runs.db"
    open_store(str(db)).close()
    _agentctl(sealed, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1")
    run_id = _agentctl(sealed, "roll", "wf.yaml")["data"]["runId"]
    copy = _old_copy(clear / "runs.db", _agentctl(clear, "roll", "wf.yaml")["data"]["runId"])

    key = os.environ["K1"]
    monkeypatch.delenv("K1")
    with open_store(str(db)) as store, pytest.raises(PersistenceError) as missing:
        with store.write() as conn:
            migrate.downgrade(conn, "0014_sealed_bytes")
    assert missing.value.code == "encryption.key_missing"
    assert _row(db, run_id) == (None, "tasks")  # rolled back whole

    monkeypatch.setenv("K1", key)
    with open_store(str(db)) as store, store.write() as conn:
        migrate.downgrade(conn, "0014_sealed_bytes")
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT output_json FROM runs").fetchone()
    conn.close()
    assert isinstance(stored, bytes) and stored.startswith(b"aes256gcm:k1:")
    with open_store(str(db)) as store:  # upgrades again, keeping the sealed copy
        assert store.revision() == migrate.head_revision()
    assert _row(db, run_id) == (stored, None)
    _check_readers(sealed, run_id, copy)


def test_a_plain_result_of_sealed_outputs_reads_back_as_the_clear_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encryption on: the task outputs are sealed, the run row holds no copy to seal, and
    every reader returns the result an unencrypted database returns for the same run."""
    monkeypatch.setenv("K1", base64.b64encode(os.urandom(32)).decode())
    clear, sealed = tmp_path / "clear", tmp_path / "sealed"
    for ws in (clear, sealed):
        ws.mkdir()
        (ws / "wf.yaml").write_text(_CHAIN)
    open_store(str(sealed / "runs.db")).close()
    _agentctl(sealed, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1")
    clear_run = _agentctl(clear, "roll", "wf.yaml")["data"]["runId"]
    sealed_run = _agentctl(sealed, "roll", "wf.yaml")["data"]
    with sqlite3.connect(sealed / "runs.db") as conn:
        blobs = conn.execute("SELECT count(*) FROM tasks WHERE typeof(output_json) = 'blob'")
        assert blobs.fetchone() == (12,)
    conn.close()
    assert _row(sealed / "runs.db", sealed_run["runId"]) == (None, "tasks")
    copy = _old_copy(clear / "runs.db", clear_run)
    assert sealed_run["output"] == json.loads(copy)
    _check_readers(sealed, sealed_run["runId"], copy)


def test_both_stores_read_the_reference_and_downgrade_writes_the_copy(
    database: str, tmp_path: Path
) -> None:
    """On SQLite and PostgreSQL alike: a reference in the run row, the old copy read back
    through the API, and a downgrade to 0014 writing exactly that copy."""
    (tmp_path / "wf.yaml").write_text(_CHAIN)
    runtime = Runtime(database)
    rolled = runtime.roll(tmp_path / "wf.yaml")
    assert rolled.state == "succeeded"
    with open_store(database) as store, store.read() as conn:
        row = conn.execute(
            select(runs.c.output_json, runs.c.output_source).where(runs.c.id == rolled.run_id)
        ).one()
        texts = conn.execute(
            select(tasks.c.task_id, tasks.c.output_json)
            .where(tasks.c.run_id == rolled.run_id, tasks.c.output_json.is_not(None))
            .order_by(tasks.c.ordinal)
        ).all()
    copy = canonical_json({task_id: json.loads(text) for task_id, text in texts})
    assert tuple(row) == (None, "tasks")
    assert rolled.output == json.loads(copy)
    assert runtime.inspect(rolled.run_id).run["output"] == json.loads(copy)
    assert runtime.resume(rolled.run_id).output == json.loads(copy)
    with open_store(database) as store:
        with store.write() as conn:
            migrate.downgrade(conn, "0014_sealed_bytes")
        with store.read() as conn:
            stored = conn.exec_driver_sql("SELECT output_json FROM runs").scalar_one()
    assert stored == copy
    # Opening upgrades again: the copy is kept (no reference), and reads the same.
    with open_store(database) as store:
        assert store.revision() == migrate.head_revision()
    assert runtime.inspect(rolled.run_id).run["output"] == json.loads(copy)
