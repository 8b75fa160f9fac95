"""The local_hash algorithm and OpenAI-compatible embeddings over a real loopback server."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pytest

from agentctl.engine.actions.embedding import build_embedder
from agentctl.errors import ProviderError, UsageError
from agentctl.ids import FixedClock
from agentctl.memory import (
    LocalHashEmbedder,
    LongTermMemory,
    OpenAICompatibleEmbedder,
    tokenize,
)
from agentctl.store.engine import Store
from tests.fixtures.llm_servers.server import (
    Drop,
    JsonReply,
    LoopbackServer,
    RawReply,
    Recorded,
    unused_port,
)


def test_tokenize_matches_the_documented_rule() -> None:
    assert tokenize("Ｄeploy-FAILED, straße_2!") == ["deploy", "failed", "strasse_2"]


def test_local_hash_is_the_documented_algorithm() -> None:
    vector = LocalHashEmbedder(dimensions=8).embed(["Alpha beta alpha"])[0]
    expected = np.zeros(8)
    for token, count in (("alpha", 2), ("beta", 1)):
        digest = hashlib.sha256(token.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % 8
        sign = 1.0 if digest[4] % 2 == 0 else -1.0
        expected[index] += sign * (1 + math.log(count))
    expected /= np.linalg.norm(expected)
    assert vector.dtype == np.float32
    assert np.allclose(vector, expected, atol=1e-6)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-6)


def test_local_hash_is_deterministic_and_empty_text_is_zero() -> None:
    one = LocalHashEmbedder().embed(["release notes", "..."])
    two = LocalHashEmbedder().embed(["release notes"])
    assert one.shape == (2, 64)
    assert one[0].tobytes() == two[0].tobytes()
    assert not np.any(one[1])


@pytest.mark.parametrize("dimensions", [7, 4097])
def test_dimension_bounds(dimensions: int) -> None:
    with pytest.raises(UsageError, match="8..4096"):
        LocalHashEmbedder(dimensions)


def _embedding_reply(dimensions: int) -> Any:
    def reply(request: Recorded) -> JsonReply:
        texts = request.json["input"]
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [float(len(t))] + [1.0] * (dimensions - 1),
            }
            for i, t in reversed(list(enumerate(texts)))  # out of order on purpose
        ]
        return JsonReply({"object": "list", "data": data, "model": request.json["model"]})

    return reply


def test_openai_compatible_embedder_posts_model_and_input() -> None:
    with LoopbackServer() as server:
        server.script(_embedding_reply(8))
        embedder = OpenAICompatibleEmbedder(
            server.url("/v1/"), "text-embedding-3-small", api_key="sk-test", dimensions=8
        )
        vectors = embedder.embed(["a", "abc"])
    request = server.requests[0]
    assert request.path == "/v1/embeddings"
    assert request.json == {
        "model": "text-embedding-3-small",
        "input": ["a", "abc"],
        "dimensions": 8,
    }
    assert request.headers["authorization"] == "Bearer sk-test"
    assert vectors.shape == (2, 8)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)
    assert vectors[1][0] > vectors[0][0]  # index order restored: "abc" has the larger lead
    assert embedder.identity == "openai:text-embedding-3-small@8"


def test_openai_embedder_learns_dimensions_and_batches() -> None:
    with LoopbackServer() as server:
        server.script(_embedding_reply(12), _embedding_reply(12))
        embedder = OpenAICompatibleEmbedder(server.url("/v1"), "m", provider="local-llm")
        assert embedder.identity == "local-llm:m@?"
        vectors = embedder.embed([f"t{i}" for i in range(130)])
    assert vectors.shape == (130, 12)
    assert [len(r.json["input"]) for r in server.requests] == [128, 2]
    assert "dimensions" not in server.requests[0].json
    assert embedder.identity == "local-llm:m@12"


def test_memory_over_the_openai_embedder(store: Store, clock: FixedClock) -> None:
    with LoopbackServer() as server:
        server.script(_embedding_reply(8), _embedding_reply(8))
        embedder = OpenAICompatibleEmbedder(server.url("/v1"), "m", dimensions=8)
        memory = LongTermMemory(store, clock, embedder)
        written = memory.put("n", "k", {"content": {"type": "text", "text": "hello"}})
        found = memory.search("n", "hello", mode="vector")
    assert written.to_json()["embeddingProvider"] == "openai"
    assert written.to_json()["embeddingDimensions"] == 8
    assert [hit.key for hit in found.hits] == ["k"]
    assert found.embedding_model == "openai:m@8"


@pytest.mark.parametrize(
    ("reply", "message", "hint"),
    [
        (JsonReply({"error": {"message": "overloaded"}}, status=503), "HTTP 503", "retry later"),
        (JsonReply({"error": {"message": "bad model"}}, status=400), "HTTP 400", "check"),
        (RawReply(b"not json"), "malformed embeddings document", None),
        (
            JsonReply({"data": [{"index": 0, "embedding": [1.0] * 9}]}),
            "9-dimensional",
            "dimensions",
        ),
        (JsonReply({"data": []}), "0 embeddings for 1 inputs", None),
        (Drop(), "request to", None),
    ],
)
def test_openai_embedder_errors(reply: Any, message: str, hint: str | None) -> None:
    with LoopbackServer() as server:
        server.script(reply)
        embedder = OpenAICompatibleEmbedder(server.url("/v1"), "m", dimensions=8)
        with pytest.raises(ProviderError, match=message) as caught:
            embedder.embed(["x"])
    assert caught.value.exit_code == 6
    assert caught.value.code == "memory.embedding_failed"
    if hint is not None:
        assert caught.value.hint is not None and hint in caught.value.hint


def test_failed_embedding_writes_nothing(store: Store, clock: FixedClock) -> None:
    with LoopbackServer() as server:
        server.script(JsonReply({"error": "down"}, status=500))
        memory = LongTermMemory(store, clock, OpenAICompatibleEmbedder(server.url(""), "m"))
        with pytest.raises(ProviderError, match="HTTP 500"):
            memory.put("n", "k", {"content": {"type": "text", "text": "hello"}})
    assert memory.get("n", "k") is None


def test_connection_refused_is_a_provider_error() -> None:
    embedder = OpenAICompatibleEmbedder(f"http://127.0.0.1:{unused_port()}/v1", "m")
    with pytest.raises(ProviderError, match="ConnectError"):
        embedder.embed(["x"])


def test_build_embedder_from_config() -> None:
    assert build_embedder(None, {}, environ={}).identity == "local_hash@64"
    assert build_embedder({"dimensions": 32}, {}, environ={}).identity == "local_hash@32"
    fake = build_embedder({"provider": "scripted"}, {"scripted": {"kind": "fake"}}, environ={})
    assert fake.identity == "scripted@64"
    remote = build_embedder(
        {"provider": "oa", "model": "text-embedding-3-small", "dimensions": 256},
        {"oa": {"kind": "openai", "endpoint": "http://127.0.0.1:9/v1/responses"}},
        environ={"OPENAI_API_KEY": "sk-env"},
    )
    assert isinstance(remote, OpenAICompatibleEmbedder)
    assert remote.endpoint == "http://127.0.0.1:9/v1"
    assert remote.identity == "oa:text-embedding-3-small@256"
    with pytest.raises(UsageError, match="not in spec.providers"):
        build_embedder({"provider": "nope"}, {}, environ={})
    with pytest.raises(UsageError, match="kind `anthropic`"):
        build_embedder({"provider": "a"}, {"a": {"kind": "anthropic"}}, environ={})
    with pytest.raises(UsageError, match="non-empty `model`"):
        build_embedder(
            {"provider": "oa"},
            {"oa": {"kind": "openai", "endpoint": "http://127.0.0.1:9/v1"}},
            environ={},
        )
