"""Migration 0003_memory_search indexes entries that existed before it, and downgrades."""

from __future__ import annotations

from pathlib import Path

from agentctl.ids import FixedClock
from agentctl.memory import LocalHashEmbedder, LongTermMemory
from agentctl.store import migrate
from agentctl.store.engine import open_store


def test_upgrade_indexes_existing_entries(tmp_path: Path, clock: FixedClock) -> None:
    with open_store(str(tmp_path / "m.db")) as store:
        memory = LongTermMemory(store, clock, LocalHashEmbedder())
        memory.put("n", "k", {"content": {"type": "text", "text": "written before the index"}})
        with store.write() as conn:
            migrate.downgrade(conn, "0002_run_workflow")
            tables = {
                row[0]
                for row in conn.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE name LIKE 'memory_search%'"
                )
            }
        assert tables == set()
        with store.write() as conn:
            migrate.upgrade(conn)
            generation = conn.exec_driver_sql(
                "SELECT generation FROM memory_search_generations WHERE namespace = 'n'"
            ).scalar_one()
        assert generation == 1
        assert [hit.key for hit in memory.search("n", "index").hits] == ["k"]
        assert [hit.key for hit in memory.search("n", "index", mode="vector").hits] == ["k"]
