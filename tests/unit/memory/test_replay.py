"""Replay safety: a recorded retrieval round-trips through JSON without the embedder."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agentctl.errors import UsageError
from agentctl.ids import FixedClock
from agentctl.memory import LongTermMemory, SearchQuery, SearchResult
from agentctl.memory.embedders import Vectors
from agentctl.store.engine import Store


class ExplodingEmbedder:
    """Fails the test if anything asks it for a vector."""

    provider = "exploding"
    dimensions = 64
    identity = "exploding@64"

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise AssertionError(f"the embedder was called for {list(texts)!r}")


@pytest.mark.parametrize("mode", ["text", "vector", "hybrid"])
def test_search_result_round_trips_through_json(corpus: LongTermMemory, mode: str) -> None:
    result = corpus.search("notes", "production deploy", mode=mode, filters={"team": "ops"})  # type: ignore[arg-type]
    recorded = json.loads(json.dumps(result.to_json()))  # what the journal stores
    assert recorded["status"] == "unchanged" and recorded["changed"] is False
    assert recorded["count"] == len(result.hits) > 0
    assert recorded["query"] == {
        "namespace": "notes",
        "text": "production deploy",
        "mode": mode,
        "limit": 10,
        "filters": {"team": "ops"},
    }
    replayed = SearchResult.from_json(recorded)
    assert replayed == result
    assert replayed.to_json() == result.to_json()


def test_replay_needs_no_embedder_and_no_store(
    corpus: LongTermMemory, store: Store, clock: FixedClock
) -> None:
    recorded = corpus.search("notes", "database", mode="hybrid").to_json()
    replaying = LongTermMemory(store, clock, ExplodingEmbedder())
    # The live path would call the embedder (the guard works) ...
    with pytest.raises(AssertionError, match="embedder was called"):
        replaying.search("notes", "database", mode="vector")
    # ... the recorded path does not, even after the store changed underneath.
    corpus.delete("notes", "db-tuning")
    replayed = SearchResult.from_json(recorded)
    assert [hit.key for hit in replayed.hits] == [r["key"] for r in recorded["results"]]
    assert "db-tuning" in [hit.key for hit in replayed.hits]


def test_text_search_never_embeds(corpus: LongTermMemory, store: Store, clock: FixedClock) -> None:
    text_only = LongTermMemory(store, clock, ExplodingEmbedder())
    assert [h.key for h in text_only.search("notes", "invoices").hits] == ["billing-outage"]


def test_malformed_records_are_refused() -> None:
    query = SearchQuery.build("n", "q").to_json()
    with pytest.raises(UsageError, match="count 3 but holds 0"):
        SearchResult.from_json({"query": query, "results": [], "count": 3})
    with pytest.raises(UsageError, match="malformed"):
        SearchResult.from_json({"query": query, "results": [{"key": "k"}], "count": 1})
