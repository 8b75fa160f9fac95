"""``db stats`` on a SQLite file and on PostgreSQL: record counts, the durability setting in
force, and the database's size (the file's, or the server's for the database)."""

from __future__ import annotations

from agentctl.store import migrate
from agentctl.store.engine import StoreSettings, open_store
from agentctl.store.stats import database_stats


def test_stats_report_counts_settings_and_size(database: str) -> None:
    with open_store(database, settings=StoreSettings(synchronous="NORMAL")) as store:
        stats = database_stats(store)
    assert stats.revision == migrate.head_revision() and stats.up_to_date
    assert stats.counts["runs"] == 0 and set(stats.counts) >= {"tasks", "effects", "budgets"}
    assert stats.database_bytes > 0
    if database.startswith("postgresql"):
        assert (stats.journal_mode, stats.wal_bytes) == ("postgresql", 0)
        assert stats.synchronous in {"ON", "OFF", "LOCAL", "REMOTE_WRITE", "REMOTE_APPLY"}
    else:
        assert (stats.journal_mode, stats.synchronous) == ("wal", "NORMAL")
