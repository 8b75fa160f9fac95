"""Embedders: the deterministic ``local_hash`` vector and OpenAI-compatible embeddings.

Every embedder returns L2-normalised float32 vectors, so cosine similarity is a dot
product. ``identity`` names the vector space (provider, model, dimensions); entries
embedded in another space are not compared with a query and ``reindex`` re-embeds them.

``local_hash`` (docs/memory.md) is feature hashing, not a neural model:

1. Tokenize: NFKC-normalise, casefold, take every maximal run of word characters
   (regex ``\\w+``), the same words the FTS5 ``unicode61`` tokenizer sees.
2. For each distinct token ``t`` occurring ``n`` times, let ``h = SHA-256(UTF-8(t))``;
   bucket ``i = uint32_be(h[0:4]) mod dimensions``; sign ``+1`` if ``h[4]`` is even else
   ``-1``; add ``sign * (1 + ln n)`` to component ``i`` (sublinear term frequency).
3. Divide by the L2 norm (a text with no tokens stays the zero vector).

Texts sharing words get a positive cosine; the signed buckets keep collisions between
unrelated words from adding up. It is reproducible in any language and needs no network.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from agentctl.errors import ProviderError, UsageError
from agentctl.spec.models_runtime import Embedding

__all__ = [
    "DEFAULT_DIMENSIONS",
    "MAX_DIMENSIONS",
    "MIN_DIMENSIONS",
    "Embedder",
    "LocalHashEmbedder",
    "OpenAICompatibleEmbedder",
    "Vectors",
    "tokenize",
]

DEFAULT_DIMENSIONS: int = Embedding.default_of("dimensions")
MIN_DIMENSIONS = 8
MAX_DIMENSIONS = 4096
_TOKEN = re.compile(r"\w+")
_BATCH = 128

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit vectors of ``dimensions`` components."""

    @property
    def provider(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    @property
    def identity(self) -> str:
        """Names the vector space; stored beside each embedding."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, float32, L2-normalised (or zero)."""
        ...


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _check_dimensions(dimensions: int) -> int:
    if isinstance(dimensions, bool) or not MIN_DIMENSIONS <= dimensions <= MAX_DIMENSIONS:
        raise UsageError(
            f"embedding dimensions must be within {MIN_DIMENSIONS}..{MAX_DIMENSIONS} "
            f"(got {dimensions})",
            code="memory.invalid_embedding",
        )
    return dimensions


def normalize_rows(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return result


class LocalHashEmbedder:
    """The default embedder: deterministic, offline (algorithm in the module docstring)."""

    def __init__(self, dimensions: int = DEFAULT_DIMENSIONS, provider: str = "local_hash"):
        self._dimensions = _check_dimensions(dimensions)
        self._provider = provider
        self._buckets: dict[str, tuple[int, float]] = {}

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def identity(self) -> str:
        return f"{self._provider}@{self._dimensions}"

    def _bucket(self, token: str) -> tuple[int, float]:
        found = self._buckets.get(token)
        if found is None:
            digest = hashlib.sha256(token.encode("utf-8")).digest()
            index = int.from_bytes(digest[0:4], "big") % self._dimensions
            found = (index, 1.0 if digest[4] % 2 == 0 else -1.0)
            if len(self._buckets) < 200_000:
                self._buckets[token] = found
        return found

    def embed(self, texts: Sequence[str]) -> Vectors:
        matrix = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for token, count in Counter(tokenize(text)).items():
                index, sign = self._bucket(token)
                matrix[row, index] += sign * (1.0 + math.log(count))
        return normalize_rows(matrix)


class OpenAICompatibleEmbedder:
    """``POST {endpoint}/embeddings`` with ``{model, input}`` (OpenAI, Ollama, vLLM, ...).

    Synchronous on purpose: memory calls run inside one store operation; an async caller
    hands the whole operation to a worker thread. Texts go in batches of 128. Any failure
    (transport, non-2xx status, malformed answer, wrong dimension) is a ``ProviderError``
    (exit 6) naming the endpoint and status, and nothing is written.
    """

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        provider: str = "openai",
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        dimensions: int | None = None,
        timeout_seconds: float = 30.0,
        transport: Any = None,
    ) -> None:
        if not model:
            raise UsageError(
                "OpenAI-compatible embeddings need a non-empty `model`",
                code="memory.invalid_embedding",
            )
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self._provider = provider
        self._dimensions = None if dimensions is None else _check_dimensions(dimensions)
        self._headers = {key.lower(): value for key, value in (headers or {}).items()}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._timeout = timeout_seconds
        self._transport = transport

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            raise UsageError(
                f"embedder `{self._provider}` has no fixed dimensions yet",
                code="memory.invalid_embedding",
            )
        return self._dimensions

    @property
    def identity(self) -> str:
        dims = "?" if self._dimensions is None else str(self._dimensions)
        return f"{self._provider}:{self.model}@{dims}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows: list[Vectors] = []
        for start in range(0, len(texts), _BATCH):
            rows.append(self._request(list(texts[start : start + _BATCH])))
        if not rows:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return normalize_rows(np.vstack(rows))

    def _request(self, batch: list[str]) -> Vectors:
        import httpx

        url = f"{self.endpoint}/embeddings"
        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        try:
            with httpx.Client(
                timeout=self._timeout, transport=self._transport, trust_env=False
            ) as client:
                response = client.post(url, json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise self._error(f"request to {url} failed: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 300:
            detail = response.text[:300]
            raise self._error(
                f"{url} answered HTTP {response.status_code}: {detail}",
                hint="the embedding service failed; retry later"
                if response.status_code >= 500 or response.status_code == 429
                else "check the provider's endpoint, model and credential",
            )
        return self._vectors(url, response.content, len(batch))

    def _vectors(self, url: str, content: bytes, expected: int) -> Vectors:
        import json

        try:
            data = json.loads(content)["data"]
            ordered = sorted(data, key=lambda item: int(item["index"]))
            matrix = np.array([item["embedding"] for item in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise self._error(f"{url} answered a malformed embeddings document: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != expected:
            raise self._error(
                f"{url} returned {matrix.shape[0] if matrix.ndim else 0} embeddings "
                f"for {expected} inputs"
            )
        if self._dimensions is None:
            self._dimensions = _check_dimensions(int(matrix.shape[1]))
        elif matrix.shape[1] != self._dimensions:
            raise self._error(
                f"{url} returned {matrix.shape[1]}-dimensional embeddings; "
                f"{self._dimensions} were configured",
                hint="set memory.longTerm.embedding.dimensions to the model's size",
            )
        if not np.all(np.isfinite(matrix)):
            raise self._error(f"{url} returned non-finite embedding components")
        return matrix

    def _error(self, message: str, hint: str | None = None) -> ProviderError:
        return ProviderError(
            f"embedding provider `{self._provider}`: {message}",
            code="memory.embedding_failed",
            hint=hint,
        )
