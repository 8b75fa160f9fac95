"""Typed entries: validation, the write-argument forms, upsert, get, expiry and gc."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from agentctl.errors import NotFoundError, UsageError
from agentctl.ids import FixedClock
from agentctl.memory import LongTermMemory, MemoryEntry, entry_from_write_arguments
from agentctl.memory.entries import MAX_ENTRY_BYTES
from agentctl.store.engine import Store


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("text", "must be an object"),
        ({}, "`content` must be"),
        ({"content": {"type": "blob"}}, "type must be `text` or `json`"),
        ({"content": {"type": "text"}}, "requires string `text`"),
        ({"content": {"type": "text", "text": "  \n"}}, "no searchable text"),
        ({"content": {"type": "json", "value": 1, "text": ""}}, "no searchable text"),
        ({"content": {"type": "json"}}, "requires `value`"),
        ({"content": {"type": "json", "value": 1, "text": 5}}, "`text` must be a string"),
        ({"content": {"type": "text", "text": "a", "x": 1}}, "only `type` and `text`"),
        ({"content": {"type": "text", "text": "a"}, "metadata": []}, "`metadata` must be"),
        ({"content": {"type": "text", "text": "a"}, "extra": 1}, "unknown fields: extra"),
        ({"formatVersion": 2, "content": {"type": "text", "text": "a"}}, "formatVersion 2"),
        ({"content": {"type": "json", "value": float("nan")}}, "not plain JSON"),
        ({"content": {"type": "text", "text": "x" * MAX_ENTRY_BYTES}}, "limit is 1048576"),
    ],
)
def test_invalid_entries(document: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        MemoryEntry.from_json(document)
    assert caught.value.exit_code == 2 and caught.value.code == "memory.invalid_entry"


def test_json_entry_searchable_text_defaults_to_canonical_value() -> None:
    entry = MemoryEntry.json_value({"b": "Berlin", "a": [1, 2]})
    assert entry.searchable_text == '{"a":[1,2],"b":"Berlin"}'
    assert entry.value == {"b": "Berlin", "a": [1, 2]}
    assert entry.to_json() == {
        "formatVersion": 1,
        "content": {"type": "json", "value": {"b": "Berlin", "a": [1, 2]}},
        "metadata": {},
    }


def test_write_argument_forms() -> None:
    legacy_text = entry_from_write_arguments({"value": "hello", "metadata": {"k": 1}})
    assert legacy_text.content == {"type": "text", "text": "hello"}
    assert legacy_text.metadata == {"k": 1}
    legacy_json = entry_from_write_arguments({"value": {"x": 1}, "text": "about x"})
    assert legacy_json.content == {"type": "json", "value": {"x": 1}, "text": "about x"}
    string_with_text = entry_from_write_arguments({"value": "v", "text": "t"})
    assert string_with_text.content == {"type": "json", "value": "v", "text": "t"}
    content = entry_from_write_arguments({"content": {"type": "text", "text": "c"}})
    assert content.content == {"type": "text", "text": "c"}
    full = entry_from_write_arguments(
        {"entry": {"content": {"type": "text", "text": "e"}, "metadata": {"m": True}}}
    )
    assert full.metadata == {"m": True}
    with pytest.raises(UsageError, match="exactly one of"):
        entry_from_write_arguments({"value": 1, "content": {"type": "text", "text": "c"}})
    with pytest.raises(UsageError, match="exactly one of"):
        entry_from_write_arguments({"key": "k"})
    with pytest.raises(UsageError, match="inside `entry`"):
        entry_from_write_arguments(
            {"entry": {"content": {"type": "text", "text": "e"}}, "metadata": {}}
        )


def test_put_get_roundtrip_and_write_output(memory: LongTermMemory) -> None:
    result = memory.put(
        "ns",
        "k",
        {"content": {"type": "json", "value": {"city": "Oslo"}, "text": "the capital"}},
        retention_days=7,
        provenance={"runId": "run-1", "taskId": "t"},
    )
    assert result.created is True
    assert result.to_json() == {
        "status": "changed",
        "changed": True,
        "namespace": "ns",
        "key": "k",
        "entry": {
            "formatVersion": 1,
            "content": {"type": "json", "value": {"city": "Oslo"}, "text": "the capital"},
            "metadata": {},
        },
        "embeddingProvider": "local_hash",
        "embeddingDimensions": 64,
        "expiresAt": "2026-03-08T12:00:00Z",
    }
    record = memory.require("ns", "k")
    assert record.entry.value == {"city": "Oslo"}
    assert record.to_json()["provenance"] == {"runId": "run-1", "taskId": "t"}
    assert record.to_json()["createdAt"] == "2026-03-01T12:00:00Z"
    assert record.embedding_model == "local_hash@64"
    read = memory.read("ns", "k")
    assert read["value"] == {"city": "Oslo"} and read["record"]["key"] == "k"
    assert memory.read("ns", "absent") == {
        "status": "unchanged",
        "changed": False,
        "value": None,
        "record": None,
    }


def test_upsert_replaces_and_keeps_created_at(
    memory: LongTermMemory, clock: FixedClock, store: Store
) -> None:
    memory.put("ns", "k", {"content": {"type": "text", "text": "first"}}, retention_days=1)
    clock.advance(3600)
    second = memory.put("ns", "k", {"content": {"type": "text", "text": "second"}})
    assert second.created is False
    record = memory.require("ns", "k")
    assert record.entry.value == "second"
    assert record.expires_at is None  # the new write decides the retention
    assert record.to_json()["createdAt"] == "2026-03-01T12:00:00Z"
    assert record.to_json()["updatedAt"] == "2026-03-01T13:00:00Z"
    with store.read() as conn:
        count = conn.exec_driver_sql("SELECT count(*) FROM memory_entries").scalar_one()
    assert count == 1


def test_prepared_write_fixes_the_effect_input(memory: LongTermMemory, clock: FixedClock) -> None:
    prepared = memory.prepare_write(
        "ns", "k", MemoryEntry.text("hello", {"a": 1}), retention_days=2
    )
    assert prepared.effect_input() == {
        "namespace": "ns",
        "key": "k",
        "entry": {
            "formatVersion": 1,
            "content": {"type": "text", "text": "hello"},
            "metadata": {"a": 1},
        },
        "expiresAt": "2026-03-03T12:00:00Z",
    }
    json.dumps(prepared.effect_input())  # journalable as is
    assert memory.get("ns", "k") is None  # preparing writes nothing
    memory.write(prepared)
    # Stored times read back as aware UTC datetimes (the store's timestamp codec).
    assert memory.require("ns", "k").expires_at == clock.now() + timedelta(days=2)


@pytest.mark.parametrize("days", [0, 36_501, True, 1.5, "3"])
def test_retention_bounds(memory: LongTermMemory, days: Any) -> None:
    with pytest.raises(UsageError, match="retentionDays"):
        memory.put("ns", "k", {"content": {"type": "text", "text": "x"}}, retention_days=days)


def test_invalid_identity(memory: LongTermMemory) -> None:
    entry = MemoryEntry.text("x")
    with pytest.raises(UsageError, match="key must be a non-empty string"):
        memory.put("ns", "", entry)
    with pytest.raises(UsageError, match="longer than 512"):
        memory.put("ns", "k" * 513, entry)
    with pytest.raises(UsageError, match="namespace must be a non-empty string"):
        memory.put(" ", "k", entry)


def test_expired_entries_are_absent_then_collected(
    memory: LongTermMemory, clock: FixedClock, store: Store
) -> None:
    memory.put("ns", "old", {"content": {"type": "text", "text": "a"}}, retention_days=1)
    memory.put("ns", "new", {"content": {"type": "text", "text": "a"}}, retention_days=3)
    memory.put("ns", "forever", {"content": {"type": "text", "text": "a"}})
    clock.advance(2 * 86_400)
    assert memory.get("ns", "old") is None
    assert memory.read("ns", "old")["record"] is None
    with pytest.raises(NotFoundError, match="no live key 'old'") as caught:
        memory.require("ns", "old")
    assert caught.value.exit_code == 5
    assert memory.gc(clock.now()) == 1
    assert memory.gc(clock.now()) == 0
    with store.read() as conn:
        left = [
            row[0] for row in conn.exec_driver_sql("SELECT key FROM memory_entries ORDER BY key")
        ]
        fts = conn.exec_driver_sql(
            "SELECT count(*) FROM memory_search_fts WHERE memory_search_fts MATCH 'a'"
        ).scalar_one()
    assert left == ["forever", "new"]
    assert fts == 2  # the trigger removed the collected row from the text index


def test_put_many_upserts_in_one_transaction(memory: LongTermMemory, clock: FixedClock) -> None:
    memory.put("bulk", "a", {"content": {"type": "text", "text": "old a"}})
    clock.advance(60)
    written = memory.put_many(
        "bulk",
        [
            ("a", MemoryEntry.text("new a", {"n": 1})),
            ("b", {"content": {"type": "json", "value": [1, 2], "text": "list b"}}),
        ],
        retention_days=5,
    )
    assert written == 2
    a = memory.require("bulk", "a")
    assert a.entry.value == "new a" and a.entry.metadata == {"n": 1}
    assert a.to_json()["createdAt"] == "2026-03-01T12:00:00Z"
    assert a.to_json()["updatedAt"] == "2026-03-01T12:01:00Z"
    assert a.to_json()["expiresAt"] == "2026-03-06T12:01:00Z"
    assert [h.key for h in memory.search("bulk", "new list").hits] == ["a", "b"]
    assert memory.search("bulk", "old").hits == ()
    with pytest.raises(UsageError, match="no searchable text"):
        memory.put_many(
            "bulk",
            [("c", MemoryEntry.text("c")), ("d", {"content": {"type": "text", "text": " "}})],
        )
    assert memory.get("bulk", "c") is None  # nothing of the failed batch was written
    assert memory.put_many("bulk", []) == 0
