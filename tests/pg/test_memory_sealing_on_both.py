"""Long-term memory and schedule/monitor inputs sealed at rest (docs/encryption.md), on a
SQLite file and on PostgreSQL.

A marker put in a memory value, its searchable text, its provenance and a schedule's
inputs is absent from the stored bytes once encryption is on, and read back with the key;
without it a memory read or search exits 5 naming the key. Search over sealed memory finds
what the same search finds over clear memory (a property over generated entries and
queries); ``rotate`` re-seals memory under the new key; ``enable`` killed half-way through
memory and run again finishes with every entry searchable.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctl.ids import FixedClock
from agentctl.memory import LocalHashEmbedder, LongTermMemory
from agentctl.store import encryption_repo, schedules_repo
from agentctl.store.engine import Store, open_store
from tests.forkserver import run_agentctl
from tests.pg.backends import rows

MARKER = "MARKER7be21a"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

TICK = """
apiVersion: agentctl.dev/v1
kind: Workflow
metadata: {name: tick}
spec:
  inputs: {ok: none}
  actions:
    check: {kind: builtin.assert}
  tasks:
    - id: check
      uses: action:check
      with: {that: "${{ inputs.ok }}"}
"""


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _dump(database: str, *tables: str) -> str:
    return "\n".join(repr(row) for t in tables for row in rows(database, f"SELECT * FROM {t}"))  # noqa: S608


def _raw_files(database: str) -> list[Path]:
    if "://" in database:
        return []
    return [p for p in (Path(database), Path(database + "-wal")) if p.exists()]


def test_memory_and_schedule_inputs_are_sealed_and_read_back_with_the_key_only(
    cli: Any, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K1", _key())
    assert cli("db", "migrate", "--db", database).exit_code == 0
    enable = ("db", "encryption", "enable", "--key-id", "k1", "--key-env", "K1", "--db", database)
    assert cli(*enable).exit_code == 0
    put = cli(
        "memory", "put", "notes", "k", json.dumps({"secret": MARKER}),
        "--text", f"the {MARKER} deploy notes", "--metadata", '{"team": "ops"}', "--db", database,
    )  # fmt: skip
    assert put.exit_code == 0, put.stderr
    Path("workflows").mkdir()
    Path("workflows/tick.yaml").write_text(TICK)
    added = cli(
        "schedule", "add", "s", "tick", "--every", "1h", "--input", f"ok={MARKER}", "--db", database
    )
    assert added.exit_code == 0, added.stderr
    with open_store(database) as store, store.write() as conn:
        slot = datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
        firing = schedules_repo.record_firing(
            conn, "s", slot, trigger="monitor", status="recorded", missed=0, reason=None,
            now=NOW, inputs_json=json.dumps({"seen": MARKER}),
        )  # fmt: skip
        schedules_repo.record_observation(conn, "s", slot, "d", json.dumps(MARKER), NOW)
        schedules_repo.set_observed(
            conn, "s", observed_json=json.dumps(MARKER), pending_json=json.dumps(MARKER),
            cursor=slot, now=NOW,
        )  # fmt: skip
    assert cli("db", "encryption", "inventory", "--db", database).exit_code == 0

    stored = _dump(database, "memory_entries", "schedules", "schedule_firings")
    stored += _dump(database, "monitor_observations")
    assert MARKER not in stored and MARKER.lower() not in stored
    for path in _raw_files(database):
        assert b"7be21a" not in path.read_bytes(), path
    inventory = cli("--output", "json", "db", "encryption", "inventory", "--db", database)
    data = inventory.json()["data"]
    assert data["clearValues"] == 0
    memory = {c["column"]: c["sealed"] for c in data["columns"] if c["table"] == "memory_entries"}
    assert memory == dict.fromkeys(
        ("value_json", "provenance_json", "text", "embedding"), {"k1": 1}
    )

    # With the key: read back as written, and found by its words.
    got = cli("--output", "json", "memory", "get", "notes", "k", "--db", database)
    assert got.exit_code == 0 and MARKER in got.stdout
    found = cli("--output", "json", "memory", "search", "notes", MARKER.lower(), "--db", database)
    assert [hit["key"] for hit in found.json()["data"]["results"]] == ["k"]
    shown = cli("--output", "json", "schedule", "show", "s", "--db", database)
    assert shown.exit_code == 0 and shown.json()["data"]["inputs"] == {"ok": MARKER}
    with open_store(database) as store, store.read() as conn:
        assert firing is not None and schedules_repo.firing(conn, firing).inputs_json == (  # type: ignore[union-attr]
            json.dumps({"seen": MARKER})
        )
        (observation,) = schedules_repo.observations(conn, "s", 5)
        assert observation.value_json == json.dumps(MARKER)

    # Without it: a payload read or a search exits 5 naming the key, never a traceback.
    monkeypatch.delenv("K1")
    searches = (("search", "notes", "deploy"), ("search", "notes", "x", "--mode", "vector"))
    for args in (("get", "notes", "k"), *searches):
        refused = cli("--output", "json", "memory", *args, "--db", database)
        assert refused.exit_code == 5, (args, refused.stderr)
        error = refused.error_json()["error"]
        assert error["code"] == "encryption.key_missing" and "'k1'" in error["message"]
        assert "Traceback" not in refused.stderr
    # A write that needs the key writes nothing.
    put = cli("--output", "json", "memory", "put", "notes", "k2", '"more"', "--db", database)
    assert put.exit_code == 5 and put.error_json()["error"]["code"] == "encryption.key_missing"
    assert rows(database, "SELECT key FROM memory_entries") == [("k",)]


# -- search over sealed memory finds what it finds in clear ----------------------------------


@pytest.fixture
def two_stores(
    database: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Store, Store]]:
    """The test's database with encryption on, and a second one of the same kind left clear."""
    if "://" in database:
        cluster = request.getfixturevalue("postgres_cluster")
        other = cluster.take_migrated()
    else:
        other = str(tmp_path / "clear.db")
    monkeypatch.setenv("K1", _key())
    try:
        with open_store(database) as sealed, open_store(other) as clear:
            encryption_repo.seal_under(sealed, "k1", "K1", rotating=False)
            yield sealed, clear
    finally:
        if "://" in database:
            cluster.give_back(other)


# Letters (cases, diacritics, combining marks, other scripts), digits and separators. Sealed
# memory finds words with SQLite's tokenizer on both stores; PostgreSQL's clear search uses
# its own parser, which keeps hosts, emails and paths (`.`, `-`, `_`) whole and diacritics
# on, so its alphabet is the one where the two agree (docs/encryption.md).
_WORDS_SQLITE = st.text(alphabet="abcdeABéü ΣςİßÉ中\u0301_-.,!01", min_size=1, max_size=30)
_WORDS_POSTGRES = st.text(alphabet="abcdeAB ,!01", min_size=1, max_size=30)
_namespaces = itertools.count()


def _hits(memory: LongTermMemory, namespace: str, query: str, mode: str) -> list[tuple[str, float]]:
    result = memory.search(namespace, query, mode=mode, limit=20)  # type: ignore[arg-type]
    return [(hit.key, hit.score) for hit in result.hits]


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sealed_search_finds_what_clear_search_finds(
    two_stores: tuple[Store, Store], database: str, data: st.DataObject
) -> None:
    """Same entries, same queries: the same hits in the same order with the same scores
    (BM25 on SQLite, ts_rank_cd on PostgreSQL, cosines), in every mode."""
    words = _WORDS_POSTGRES if "://" in database else _WORDS_SQLITE
    texts = data.draw(st.lists(words, min_size=1, max_size=8), label="texts")
    queries = data.draw(st.lists(words, min_size=1, max_size=3), label="queries")
    namespace = f"ns{next(_namespaces)}"
    clock = FixedClock(NOW)
    sealed, clear = (LongTermMemory(s, clock, LocalHashEmbedder()) for s in two_stores)
    entries = [
        (f"k{i}", {"content": {"type": "text", "text": text}})
        for i, text in enumerate(texts)
        if text.strip()
    ]
    for memory in (sealed, clear):
        memory.put_many(namespace, entries)
    for query in queries:
        if not query.strip():
            continue
        for mode in ("text", "hybrid", "vector"):
            assert _hits(sealed, namespace, query, mode) == _hits(clear, namespace, query, mode), (
                mode,
                query,
            )


# -- rotate and an interrupted enable ----------------------------------------------------


def _put_notes(store: Store, count: int) -> LongTermMemory:
    memory = LongTermMemory(store, FixedClock(NOW), LocalHashEmbedder())
    memory.put_many(
        "notes",
        [
            (f"n{i:04}", {"content": {"type": "text", "text": f"note {i} about {MARKER} deploy"}})
            for i in range(count)
        ],
        provenance={"from": MARKER},
    )
    return memory


def _memory_keys(database: str) -> dict[str, dict[str, int]]:
    with open_store(database) as store:
        data = encryption_repo.inventory(store)
    return {
        c["column"]: c["sealed"] | {"clear": c["clear"]}
        for c in data["columns"]
        if c["table"] == "memory_entries"
    }


def test_rotate_reseals_memory_and_the_old_key_can_go(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K1", _key())
    with open_store(database) as store:
        encryption_repo.seal_under(store, "k1", "K1", rotating=False)
        before = _hits(_put_notes(store, 3), "notes", "deploy note 1", "hybrid")
    tokens_k1 = rows(database, "SELECT text FROM memory_entries ORDER BY key")
    monkeypatch.setenv("K2", _key())
    monkeypatch.setenv("AGENTCTL_ENCRYPTION_KEYS", f"k1={os.environ.pop('K1')}")
    with open_store(database) as store:
        report = encryption_repo.seal_under(store, "k2", "K2", rotating=True)
    assert report["otherKeyValuesLeft"] == 0 and report["clearValuesLeft"] == 0
    assert _memory_keys(database) == {
        "value_json": {"k2": 3, "clear": 0},
        "provenance_json": {"k2": 3, "clear": 0},
        "text": {"k2": 3, "clear": 0},
        "embedding": {"k2": 3, "clear": 0},
    }
    assert rows(database, "SELECT text FROM memory_entries ORDER BY key") != tokens_k1
    monkeypatch.delenv("AGENTCTL_ENCRYPTION_KEYS")
    with open_store(database) as store:
        memory = LongTermMemory(store, FixedClock(NOW), LocalHashEmbedder())
        assert _hits(memory, "notes", "deploy note 1", "hybrid") == before
        record = memory.require("notes", "n0001")
        assert record.provenance == {"from": MARKER}


def test_enable_killed_half_way_through_memory_then_run_again_finishes(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(database) as store:
        before = _hits(_put_notes(store, 260), "notes", "note 7 deploy", "hybrid")
    monkeypatch.setenv("K1", _key())
    enable = ["db", "encryption", "enable"]
    enable += ["--key-id", "k1", "--key-env", "K1", "--db", database]
    env = {**os.environ, "AGENTCTL_FAULT": "encryption.batch:1"}
    killed = run_agentctl(enable, env=env)
    assert killed.returncode == -9, killed.stderr  # SIGKILLed after its first batch committed
    half = _memory_keys(database)
    assert half["value_json"] == {"k1": 200, "clear": 60}
    assert half["text"] == {"k1": 200, "clear": 60}
    with open_store(database) as store:  # half-sealed, sealed and clear entries are found
        middle = LongTermMemory(store, FixedClock(NOW), LocalHashEmbedder())
        for number in ("1", "259"):
            assert [key for key, _ in _hits(middle, "notes", number, "text")] == [f"n0{number:0>3}"]
    with open_store(database) as store:  # run again (in this process: the same walk)
        finished = encryption_repo.seal_under(store, "k1", "K1", rotating=False)
    assert finished["valuesSealed"] == 60 * 4 and finished["clearValuesLeft"] == 0
    assert all(counts == {"k1": 260, "clear": 0} for counts in _memory_keys(database).values())
    assert MARKER not in _dump(database, "memory_entries")
    for path in _raw_files(database):
        assert b"7be21a" not in path.read_bytes(), path
    with open_store(database) as store:
        after = LongTermMemory(store, FixedClock(NOW), LocalHashEmbedder())
        assert _hits(after, "notes", "note 7 deploy", "hybrid") == before
