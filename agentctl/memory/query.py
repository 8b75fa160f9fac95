"""The normalized search query and the recorded retrieval (``SearchResult``).

A retrieval is an observation effect: the executor journals ``SearchResult.to_json()`` as
the effect result, and replay or resume rebuilds it with ``SearchResult.from_json`` —
no store, no embedder, no clock. ``to_json()`` is exactly the task output of
``builtin.long_term_memory.search`` (docs/actions.md), so the journal and the output never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import Field, computed_field
from pydantic.dataclasses import dataclass

from agentctl.digest import canonical_json
from agentctl.errors import AgentctlError, UsageError
from agentctl.memory.entries import validate_namespace
from agentctl.typed_records import CAMEL, CamelRecord, keys_in_order

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_QUERY_BYTES",
    "SEARCH_MODES",
    "SearchHit",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
]

SearchMode = Literal["text", "vector", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("text", "vector", "hybrid")
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_QUERY_BYTES = 64 * 1024


def _invalid(message: str) -> UsageError:
    return UsageError(message, code="memory.invalid_query")


@dataclass(frozen=True, slots=True, config=CAMEL)
class SearchQuery(CamelRecord):
    """What to search: validated, with defaults filled (the effect input of a search)."""

    namespace: str
    text: str
    mode: SearchMode = "text"
    limit: int = DEFAULT_LIMIT
    filters: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        namespace: object,
        text: object,
        *,
        mode: object = "text",
        limit: object = DEFAULT_LIMIT,
        filters: object = None,
    ) -> SearchQuery:
        namespace = validate_namespace(namespace)
        if not isinstance(text, str) or not text.strip():
            raise _invalid("search query must be a non-empty string")
        if len(text.encode("utf-8")) > MAX_QUERY_BYTES:
            raise _invalid(f"search query is longer than {MAX_QUERY_BYTES} bytes (64 KiB)")
        if mode not in SEARCH_MODES:
            raise _invalid(f"search mode must be one of {', '.join(SEARCH_MODES)} (got {mode!r})")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise _invalid(f"search limit must be an integer within 1..{MAX_LIMIT} (got {limit!r})")
        if filters is None:
            filters = {}
        if not isinstance(filters, Mapping):
            raise _invalid("search filters must be an object of metadata key -> value")
        for key in filters:
            if not isinstance(key, str) or not key or '"' in key:
                raise _invalid(f"filter key {key!r} must be a non-empty string without quotes")
        try:
            canonical_json(dict(filters))
        except (TypeError, ValueError) as exc:
            raise _invalid(f"search filters are not plain JSON: {exc}") from exc
        return cls(namespace, text, mode, limit, dict(filters))

    @classmethod
    def from_json(cls, document: Any) -> SearchQuery:
        """Read a query back through :meth:`build`: the same rules as a new one."""
        if not isinstance(document, Mapping):
            raise _invalid("search query must be an object")
        return cls.build(
            document.get("namespace"),
            document.get("text"),
            mode=document.get("mode", "text"),
            limit=document.get("limit", DEFAULT_LIMIT),
            filters=document.get("filters"),
        )


@dataclass(frozen=True, slots=True, config=CAMEL)
class SearchHit(CamelRecord):
    """One result: the entry as stored and why it ranked (``score``, higher is better)."""

    namespace: str
    key: str
    score: float
    entry: Mapping[str, Any]
    updated_at: str | None
    expires_at: str | None

    @classmethod
    def invalid(cls, detail: str) -> AgentctlError:
        return UsageError(
            f"recorded memory retrieval is malformed: {detail}", code="memory.invalid_record"
        )


@dataclass(frozen=True, slots=True, config=CAMEL)
class SearchResult(CamelRecord):
    """A retrieval: the query, its hits (score desc, then key) and the embedder used.

    Its JSON form is the task output, so it leads with the output's status fields and the
    count; the hits are its ``results``. It is read back through :meth:`from_json`, which
    checks the query by the rules of a new one and the count against the hits."""

    query: SearchQuery
    hits: Annotated[tuple[SearchHit, ...], Field(alias="results")]
    embedding_model: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> Literal["unchanged"]:
        return "unchanged"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changed(self) -> bool:
        return False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def count(self) -> int:
        return len(self.hits)

    _order = keys_in_order("status", "changed", "count")

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> SearchResult:
        """Rebuild a recorded retrieval (replay); checks the count it was recorded with."""
        try:
            hits = tuple(SearchHit.from_json(item) for item in document["results"])
            query = SearchQuery.from_json(document["query"])
        except (KeyError, TypeError) as exc:
            raise UsageError(
                f"recorded memory retrieval is malformed: {exc}", code="memory.invalid_record"
            ) from exc
        if document.get("count") != len(hits):
            raise UsageError(
                f"recorded memory retrieval says count {document.get('count')!r} "
                f"but holds {len(hits)} results",
                code="memory.invalid_record",
            )
        return cls(query=query, hits=hits, embedding_model=document.get("embeddingModel"))
