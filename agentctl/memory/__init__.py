"""Long-term memory: typed entries, retention, and text, vector and hybrid search.

Working memory (per-run deltas and snapshots) lives with the executor; this package is the
cross-run store of docs/memory.md. See docs/memory.md for the algorithms.
"""

from agentctl.memory.embedders import (
    DEFAULT_DIMENSIONS,
    Embedder,
    LocalHashEmbedder,
    OpenAICompatibleEmbedder,
    tokenize,
)
from agentctl.memory.entries import (
    MemoryEntry,
    MemoryRecord,
    entry_from_write_arguments,
    validate_retention_days,
)
from agentctl.memory.fusion import RRF_K, reciprocal_rank_fusion
from agentctl.memory.housekeeping import GcReport, collect_garbage
from agentctl.memory.longterm import LongTermMemory, MemoryWrite, ReindexReport, WriteResult
from agentctl.memory.query import SearchHit, SearchQuery, SearchResult

__all__ = [
    "DEFAULT_DIMENSIONS",
    "RRF_K",
    "Embedder",
    "GcReport",
    "LocalHashEmbedder",
    "LongTermMemory",
    "MemoryEntry",
    "MemoryRecord",
    "MemoryWrite",
    "OpenAICompatibleEmbedder",
    "ReindexReport",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "WriteResult",
    "collect_garbage",
    "entry_from_write_arguments",
    "reciprocal_rank_fusion",
    "tokenize",
    "validate_retention_days",
]
