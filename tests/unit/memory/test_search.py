"""Search on a small corpus in each mode, with filters, expiry and index maintenance."""

from __future__ import annotations

import pytest

from agentctl.errors import UsageError
from agentctl.ids import FixedClock
from agentctl.memory import LongTermMemory, SearchQuery
from agentctl.memory.fusion import RRF_K, reciprocal_rank_fusion
from agentctl.memory.text_index import RankedId, match_expression


def keys(memory: LongTermMemory, query: str, **options: object) -> list[str]:
    result = memory.search("notes", query, **options)  # type: ignore[arg-type]
    return [hit.key for hit in result.hits]


def test_text_mode_ranks_bm25_matches_only(corpus: LongTermMemory) -> None:
    result = corpus.search("notes", "production deploy", mode="text")
    assert [hit.key for hit in result.hits] == ["rollback-guide", "deploy-failure"]
    assert result.hits[0].score > result.hits[1].score > 0
    assert all(hit.namespace == "notes" for hit in result.hits)  # "other" is not searched
    assert keys(corpus, "invoices") == ["billing-outage"]
    assert keys(corpus, "kubernetes") == []


def test_text_query_is_never_fts_syntax(corpus: LongTermMemory) -> None:
    assert match_expression('deploy" OR NOT * ( billing') == (
        '"deploy" OR "or" OR "not" OR "billing"'
    )
    assert keys(corpus, 'NEAR(billing "invoices" *') == ["billing-outage"]
    assert keys(corpus, "!!! ---") == []


def test_vector_mode_ranks_by_cosine(corpus: LongTermMemory) -> None:
    result = corpus.search("notes", "production deploy failed", mode="vector", limit=2)
    assert [hit.key for hit in result.hits] == ["rollback-guide", "deploy-failure"]
    assert 0 < result.hits[1].score <= result.hits[0].score <= 1
    assert result.embedding_model == "local_hash@64"
    everything = corpus.search("notes", "production deploy failed", mode="vector", limit=100)
    assert len(everything.hits) == 5  # every live entry has a cosine
    scores = [(-hit.score, hit.key) for hit in everything.hits]
    assert scores == sorted(scores)


def test_hybrid_mode_fuses_both_rankings(corpus: LongTermMemory) -> None:
    result = corpus.search("notes", "database migration", mode="hybrid", limit=3)
    assert result.hits[0].key == "deploy-failure"  # first in both rankings
    assert result.hits[0].score == round(2 / (RRF_K + 1), 6)
    assert {hit.key for hit in result.hits} >= {"deploy-failure", "db-tuning"}


def test_rrf_orders_by_score_then_key() -> None:
    text = [RankedId(1, "a", 9.0), RankedId(2, "b", 5.0)]
    vector = [RankedId(2, "b", 0.9), RankedId(1, "a", 0.8), RankedId(3, "c", 0.1)]
    fused = reciprocal_rank_fusion([text, vector])
    assert [(item.key, item.score) for item in fused] == [
        ("a", round(1 / 61 + 1 / 62, 6)),
        ("b", round(1 / 62 + 1 / 61, 6)),
        ("c", round(1 / 63, 6)),
    ]


@pytest.mark.parametrize("mode", ["text", "vector", "hybrid"])
def test_metadata_filters_are_exact(corpus: LongTermMemory, mode: str) -> None:
    ops = keys(corpus, "production deploy database", mode=mode, filters={"team": "ops"})
    assert set(ops) <= {"deploy-failure", "rollback-guide", "db-tuning"}
    assert "deploy-failure" in ops
    both = keys(corpus, "production deploy", mode=mode, filters={"team": "ops", "severity": "low"})
    assert both == ["rollback-guide"]
    assert keys(corpus, "database", mode=mode, filters={"severity": None}) == ["db-tuning"]
    assert keys(corpus, "deploy", mode=mode, filters={"team": "OPS"}) == []
    assert keys(corpus, "deploy", mode=mode, filters={"missing": None}) == []


def test_filter_values_compare_as_canonical_json(memory: LongTermMemory) -> None:
    memory.put("n", "k", {"content": {"type": "text", "text": "alpha"}, "metadata": {"v": 1}})
    memory.put(
        "n",
        "j",
        {"content": {"type": "text", "text": "alpha"}, "metadata": {"v": {"b": 1, "a": 2}}},
    )
    assert [h.key for h in memory.search("n", "alpha", filters={"v": 1}).hits] == ["k"]
    assert memory.search("n", "alpha", filters={"v": True}).hits == ()
    assert memory.search("n", "alpha", filters={"v": "1"}).hits == ()
    nested = memory.search("n", "alpha", filters={"v": {"a": 2, "b": 1}})
    assert [h.key for h in nested.hits] == ["j"]


def test_limit_and_tie_order(memory: LongTermMemory) -> None:
    for key in ("c", "a", "b"):
        memory.put("ties", key, {"content": {"type": "text", "text": "same words here"}})
    for mode in ("text", "vector", "hybrid"):
        result = memory.search("ties", "same words", mode=mode, limit=2)  # type: ignore[arg-type]
        assert [hit.key for hit in result.hits] == ["a", "b"], mode
        if mode != "hybrid":  # RRF sees ranks, so equal scores become neighbouring ranks
            assert result.hits[0].score == result.hits[1].score


@pytest.mark.parametrize("mode", ["text", "vector", "hybrid"])
def test_expired_entries_are_not_found(
    memory: LongTermMemory, clock: FixedClock, mode: str
) -> None:
    memory.put(
        "n", "short", {"content": {"type": "text", "text": "ephemeral note"}}, retention_days=1
    )
    memory.put(
        "n", "long", {"content": {"type": "text", "text": "ephemeral note"}}, retention_days=30
    )
    assert keys_in(memory, "n", mode) == ["long", "short"]
    clock.advance(86_400)  # exactly the expiry: expired
    assert keys_in(memory, "n", mode) == ["long"]


def keys_in(memory: LongTermMemory, namespace: str, mode: str) -> list[str]:
    result = memory.search(namespace, "ephemeral note", mode=mode)  # type: ignore[arg-type]
    return [hit.key for hit in result.hits]


def test_index_follows_overwrite_and_delete(memory: LongTermMemory) -> None:
    memory.put("n", "k", {"content": {"type": "text", "text": "apples and pears"}})
    assert [h.key for h in memory.search("n", "apples", mode="vector").hits] == ["k"]
    memory.put("n", "k", {"content": {"type": "text", "text": "oranges only"}})
    assert memory.search("n", "apples").hits == ()
    assert [h.key for h in memory.search("n", "oranges").hits] == ["k"]
    vector = memory.search("n", "oranges only", mode="vector")
    assert vector.hits[0].score == pytest.approx(1.0, abs=1e-5)  # cache reloaded
    assert memory.delete("n", "k") is True
    assert memory.delete("n", "k") is False
    assert memory.search("n", "oranges").hits == ()
    assert memory.search("n", "oranges", mode="vector").hits == ()


def test_reindex_reembeds_with_the_current_embedder(memory: LongTermMemory) -> None:
    from agentctl.memory import LocalHashEmbedder

    memory.put("n", "k", {"content": {"type": "text", "text": "graph databases"}})
    memory.embedder = LocalHashEmbedder(dimensions=16)
    assert memory.search("n", "graph", mode="vector").hits == ()  # other vector space
    report = memory.reindex("n")
    assert report.to_json() == {"namespace": "n", "entries": 1, "embeddingModel": "local_hash@16"}
    assert [h.key for h in memory.search("n", "graph", mode="vector").hits] == ["k"]
    assert memory.embedding_models("n") == {"local_hash@16": 1}
    assert [h.key for h in memory.search("n", "graph").hits] == ["k"]  # FTS rebuilt


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "fuzzy"}, "search mode must be one of"),
        ({"limit": 0}, "within 1..100"),
        ({"limit": 101}, "within 1..100"),
        ({"limit": True}, "within 1..100"),
        ({"filters": ["team"]}, "filters must be an object"),
        ({"filters": {'a"b': 1}}, "without quotes"),
    ],
)
def test_invalid_queries(options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        SearchQuery.build("n", "hello", **options)  # type: ignore[arg-type]
    assert caught.value.code == "memory.invalid_query" and caught.value.exit_code == 2


def test_query_text_bounds() -> None:
    with pytest.raises(UsageError, match="non-empty string"):
        SearchQuery.build("n", "   ")
    with pytest.raises(UsageError, match="64 KiB"):
        SearchQuery.build("n", "x" * (64 * 1024 + 1))
    with pytest.raises(UsageError, match="namespace"):
        SearchQuery.build("", "x")
    query = SearchQuery.build("n", "hello")
    assert query.to_json() == {
        "namespace": "n",
        "text": "hello",
        "mode": "text",
        "limit": 10,
        "filters": {},
    }


def test_vector_filter_widens_the_window_until_enough_pass(memory: LongTermMemory) -> None:
    entries = [
        (
            f"match-{i:03d}",
            {"content": {"type": "text", "text": "red apple pie"}, "metadata": {"k": "common"}},
        )
        for i in range(120)
    ]
    entries += [
        ("rare-1", {"content": {"type": "text", "text": "red car"}, "metadata": {"k": "rare"}}),
        ("rare-2", {"content": {"type": "text", "text": "blue sky"}, "metadata": {"k": "rare"}}),
    ]
    memory.put_many("w", entries)
    result = memory.search("w", "red apple pie", mode="vector", limit=2, filters={"k": "rare"})
    assert [hit.key for hit in result.hits] == ["rare-1", "rare-2"]
    unfiltered = memory.search("w", "red apple pie", mode="vector", limit=3)
    assert [hit.key for hit in unfiltered.hits] == ["match-000", "match-001", "match-002"]
