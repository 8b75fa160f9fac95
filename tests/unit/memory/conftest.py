"""Fixtures for long-term memory: a real SQLite file, a fixed clock, the local embedder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentctl.ids import FixedClock
from agentctl.memory import LocalHashEmbedder, LongTermMemory
from agentctl.store.engine import Store, open_store

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

CORPUS: dict[str, dict[str, object]] = {
    "deploy-failure": {
        "content": {
            "type": "text",
            "text": "The deploy to production failed during the database migration",
        },
        "metadata": {"team": "ops", "severity": "high"},
    },
    "billing-outage": {
        "content": {
            "type": "text",
            "text": "Billing service outage: invoices were delayed for two hours",
        },
        "metadata": {"team": "payments", "severity": "high"},
    },
    "rollback-guide": {
        "content": {
            "type": "json",
            "value": {"steps": ["stop traffic", "roll back the release"]},
            "text": "How to rollback a failed production deploy",
        },
        "metadata": {"team": "ops", "severity": "low"},
    },
    "lunch": {
        "content": {"type": "text", "text": "Team lunch is on Friday at noon"},
        "metadata": {"team": "people"},
    },
    "db-tuning": {
        "content": {"type": "text", "text": "Database vacuum and index tuning notes"},
        "metadata": {"team": "ops", "severity": None},
    },
}


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "memory.db")) as opened:
        yield opened


@pytest.fixture
def memory(store: Store, clock: FixedClock) -> LongTermMemory:
    return LongTermMemory(store, clock, LocalHashEmbedder())


@pytest.fixture
def corpus(memory: LongTermMemory) -> LongTermMemory:
    for key, entry in CORPUS.items():
        memory.put("notes", key, entry)
    memory.put("other", "deploy-elsewhere", CORPUS["deploy-failure"])
    return memory
