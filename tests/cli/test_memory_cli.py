"""``agentctl memory get|put|search|reindex`` and ``agentctl gc`` through the real CLI boundary.

app.py registers the command groups; these tests mount the memory sub-app and the gc
command on a bare root app so they exercise exactly this module, through ``main()``
(global options, JSON envelopes, exit codes).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import typer

from agentctl.cli import memory as memory_cli
from agentctl.ids import FixedClock
from agentctl.memory import LocalHashEmbedder, LongTermMemory
from agentctl.store.engine import open_store


@pytest.fixture
def mcli(cli: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    root = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

    @root.callback()
    def _root() -> None:
        """Test root."""

    root.add_typer(memory_cli.app, name="memory")
    root.command("gc")(memory_cli.gc_command)
    monkeypatch.setattr("agentctl.cli.app.app", root)
    return cli


@pytest.fixture
def db(database: str) -> str:
    """A SQLite file, then a fresh PostgreSQL database: memory behaves alike on both."""
    return database


def test_put_get_json_envelopes(mcli: Any, db: str) -> None:
    put = mcli(
        "--output", "json", "memory", "put", "notes", "k1", '{"city": "Oslo"}',
        "--text", "capital of Norway", "--metadata", '{"team": "geo"}',
        "--retention-days", "30", "--db", db,
    )  # fmt: skip
    assert put.exit_code == 0, put.stderr
    document = put.json()
    assert document["kind"] == "MemoryWrite" and document["ok"] is True
    assert document["data"]["entry"] == {
        "formatVersion": 1,
        "content": {"type": "json", "value": {"city": "Oslo"}, "text": "capital of Norway"},
        "metadata": {"team": "geo"},
    }
    assert document["data"]["embeddingProvider"] == "local_hash"
    assert document["data"]["expiresAt"].endswith("Z")

    got = mcli("--output", "json", "memory", "--db", db, "get", "notes", "k1")
    assert got.exit_code == 0, got.stderr
    data = got.json()["data"]
    assert got.json()["kind"] == "MemoryEntry"
    assert data["key"] == "k1" and data["entry"]["content"]["value"] == {"city": "Oslo"}
    assert data["provenance"] == {"source": "cli"}

    human = mcli("memory", "get", "notes", "k1", "--db", db)
    assert human.stdout.strip() == 'notes/k1 = {"city": "Oslo"}'


def test_string_value_is_a_text_entry_and_upsert(mcli: Any, db: str) -> None:
    assert mcli("memory", "put", "n", "k", '"first note"', "--db", db).stdout.startswith(
        "created n/k"
    )
    again = mcli("memory", "put", "n", "k", '"second note"', "--db", db)
    assert again.stdout.strip() == "replaced n/k"
    got = mcli("--output", "json", "memory", "get", "n", "k", "--db", db).json()["data"]
    assert got["entry"]["content"] == {"type": "text", "text": "second note"}


def test_missing_key_exits_5(mcli: Any, db: str) -> None:
    assert mcli("memory", "put", "n", "present", '"x"', "--db", db).exit_code == 0
    result = mcli("--output", "json", "memory", "get", "n", "absent", "--db", db)
    assert result.exit_code == 5 and result.stdout == ""
    error = result.error_json()["error"]
    assert error["code"] == "memory.not_found"
    assert "'absent'" in error["message"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["put", "n", "k", "not json"], "cli.usage", "VALUE_JSON is not valid JSON"),
        (["put", "n", "k", '"x"', "--metadata", "[1]"], "memory.invalid_entry", "`metadata`"),
        (["put", "n", "k", '"x"', "--retention-days", "0"], "memory.invalid_entry", "1..36500"),
        (["put", "n", "k", '"   "'], "memory.invalid_entry", "no searchable text"),
        (["search", "n", "q", "--mode", "fuzzy"], "memory.invalid_query", "search mode"),
        (["search", "n", "q", "--limit", "500"], "memory.invalid_query", "1..100"),
        (["search", "n", "q", "--filter", "team"], "cli.usage", "KEY=JSON"),
        (["search", "n", "q", "--filter", "team=ops"], "cli.usage", "not valid JSON"),
    ],
)
def test_usage_errors_exit_2(mcli: Any, db: str, args: list[str], code: str, message: str) -> None:
    result = mcli("--output", "json", "memory", *args, "--db", db)
    assert result.exit_code == 2, result.stdout
    error = result.error_json()["error"]
    assert error["code"] == code and message in error["message"]


def _seed(mcli: Any, db: str) -> None:
    entries = [
        ("deploy", '"production deploy failed at the migration step"', '{"team": "ops"}'),
        ("rollback", '"how to roll back a production deploy"', '{"team": "ops"}'),
        ("invoice", '"invoices delayed by the billing outage"', '{"team": "payments"}'),
    ]
    for key, value, metadata in entries:
        result = mcli("memory", "put", "kb", key, value, "--metadata", metadata, "--db", db)
        assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("mode", ["text", "vector", "hybrid"])
def test_search_modes_and_filters(mcli: Any, db: str, mode: str) -> None:
    _seed(mcli, db)
    result = mcli(
        "--output", "json", "memory", "search", "kb", "production deploy",
        "--mode", mode, "--limit", "2", "--filter", 'team="ops"', "--db", db,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = result.json()["data"]
    assert result.json()["kind"] == "MemorySearch"
    assert data["query"] == {
        "namespace": "kb",
        "text": "production deploy",
        "mode": mode,
        "limit": 2,
        "filters": {"team": "ops"},
    }
    assert data["count"] == 2
    assert {hit["key"] for hit in data["results"]} == {"deploy", "rollback"}


def test_search_human_and_empty(mcli: Any, db: str) -> None:
    _seed(mcli, db)
    found = mcli("memory", "search", "kb", "invoices", "--db", db)
    assert found.exit_code == 0
    assert "invoice  invoices delayed by the billing outage" in found.stdout
    none = mcli("memory", "search", "kb", "kubernetes", "--db", db)
    assert none.stdout.strip() == "no results"


def test_vector_search_refuses_foreign_embeddings(mcli: Any, db: str) -> None:
    with open_store(str(db)) as store:
        clock = FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
        memory = LongTermMemory(store, clock, LocalHashEmbedder(16, provider="remote"))
        memory.put("kb", "k", {"content": {"type": "text", "text": "remote vectors"}})
    vector = mcli("--output", "json", "memory", "search", "kb", "remote", "--mode", "vector",
                  "--db", db)  # fmt: skip
    assert vector.exit_code == 2
    assert vector.error_json()["error"]["code"] == "memory.embedding_mismatch"
    text = mcli("--output", "json", "memory", "search", "kb", "remote", "--db", db)
    assert text.json()["data"]["count"] == 1
    reindexed = mcli("--output", "json", "memory", "reindex", "kb", "--db", db)
    assert reindexed.json()["data"] == {
        "namespace": "kb",
        "entries": 1,
        "embeddingModel": "local_hash@64",
    }
    again = mcli("--output", "json", "memory", "search", "kb", "remote", "--mode", "vector",
                 "--db", db)  # fmt: skip
    assert again.exit_code == 0 and again.json()["data"]["count"] == 1


def test_gc_dry_run_and_collect(mcli: Any, db: str) -> None:
    with open_store(str(db)) as store:
        past = LongTermMemory(
            store, FixedClock(datetime(2000, 1, 1, tzinfo=UTC)), LocalHashEmbedder()
        )
        past.put("n", "old", {"content": {"type": "text", "text": "stale"}}, retention_days=1)
        past.put("n", "kept", {"content": {"type": "text", "text": "kept"}})
    dry = mcli("--output", "json", "gc", "--dry-run", "--db", db)
    assert dry.exit_code == 0, dry.stderr
    assert dry.json()["kind"] == "GcReport"
    assert dry.json()["data"]["dryRun"] is True
    assert dry.json()["data"]["expiredMemoryEntries"] == 1
    assert (
        mcli("--output", "json", "memory", "search", "n", "stale", "--db", db).json()["data"][
            "count"
        ]
        == 0
    )  # expired entries are not found even before gc
    done = mcli("gc", "--older-than-days", "7", "--db", db)
    assert done.exit_code == 0
    assert done.stdout.startswith("removed 1 expired memory entries and 0 runs")
    with open_store(str(db)) as store, store.read() as conn:
        keys = [row[0] for row in conn.exec_driver_sql("SELECT key FROM memory_entries")]
    assert keys == ["kept"]


def test_every_command_has_help(mcli: Any) -> None:
    for args in (["memory", "--help"], ["memory", "search", "--help"], ["gc", "--help"]):
        result = mcli(*args)
        assert result.exit_code == 0 and "Usage" in result.stdout, args
    assert "expired long-term memory" in mcli("gc", "--help").stdout
