"""Long-term memory's statements on a SQLite file and on PostgreSQL: metadata filters (each
dialect's JSON member), the text index (FTS5 or ``tsvector``) and its rebuild, expiry and
id lists. The same calls find the same entries on both; only text scores differ."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from agentctl.ids import FixedClock
from agentctl.memory import LocalHashEmbedder, LongTermMemory
from agentctl.store import memory_repo, memory_search_repo
from agentctl.store.engine import Store, open_store

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

ENTRIES: dict[str, tuple[str, dict[str, object]]] = {
    "deploy-failure": ("The deploy to production failed", {"team": "ops", "severity": "high"}),
    "rollback-guide": ("How to rollback a failed production deploy", {"team": "ops", "n": 1}),
    "billing": ("Billing outage delayed invoices", {"team": "payments", "n": {"b": 1, "a": 2}}),
    "db-tuning": ("Database vacuum and index tuning", {"team": "ops", "severity": None}),
}


@pytest.fixture
def memory(database: str) -> Iterator[tuple[Store, FixedClock, LongTermMemory]]:
    clock = FixedClock(START)
    with open_store(database) as store:
        memory = LongTermMemory(store, clock, LocalHashEmbedder())
        for key, (text, metadata) in ENTRIES.items():
            memory.put(
                "notes", key, {"content": {"type": "text", "text": text}, "metadata": metadata}
            )
        yield store, clock, memory


def keys(memory: LongTermMemory, query: str, mode: str = "text", **filters: object) -> set[str]:
    found = memory.search("notes", query, mode=mode, filters=filters)  # type: ignore[arg-type]
    return {hit.key for hit in found.hits}


@pytest.mark.parametrize("mode", ["text", "vector"])
def test_metadata_filters_match_the_canonical_json_of_a_member(
    memory: tuple[Store, FixedClock, LongTermMemory], mode: str
) -> None:
    _, _, found = memory
    assert keys(found, "production deploy", mode, team="ops") >= {"deploy-failure"}
    assert keys(found, "production deploy", mode, team="ops") <= {
        "deploy-failure",
        "rollback-guide",
        "db-tuning",
    }
    assert keys(found, "rollback production deploy", mode, n=1) == {"rollback-guide"}
    assert keys(found, "rollback production deploy", mode, n=True) == set()
    assert keys(found, "billing outage", mode, n={"a": 2, "b": 1}) == {"billing"}
    assert keys(found, "database tuning", mode, severity=None) == {"db-tuning"}
    assert keys(found, "deploy", mode, team="OPS") == set()


def test_text_index_matches_and_survives_a_rebuild(
    memory: tuple[Store, FixedClock, LongTermMemory],
) -> None:
    store, _, found = memory
    assert keys(found, "production deploy") == {"deploy-failure", "rollback-guide"}
    with store.write() as conn:
        memory_repo.rebuild_text_index(conn)
    assert keys(found, "production deploy") == {"deploy-failure", "rollback-guide"}
    assert keys(found, "invoices") == {"billing"}


def test_expired_entries_and_id_lists(memory: tuple[Store, FixedClock, LongTermMemory]) -> None:
    store, clock, found = memory
    found.put(
        "notes", "short", {"content": {"type": "text", "text": "ephemeral"}}, retention_days=1
    )
    clock.advance(86_400)
    now = clock.now()
    with store.read() as conn:
        assert memory_repo.count_expired(conn, now) == 1
        (expired,) = memory_search_repo.expired_ids(conn, "notes", now)
        ids = [expired, *(e.id for e in memory_repo.entries_by_id(conn, [expired]).values())]
        live = memory_search_repo.ids_matching(conn, "notes", now, {}, ids)
    assert live == []
    assert keys(found, "ephemeral") == set()
    with store.write() as conn:
        assert memory_repo.delete_expired(conn, now, limit=10) == 1
