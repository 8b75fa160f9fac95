"""Long-term memory: typed entries, retention, and text, vector and hybrid search.

Working memory (per-run deltas and snapshots) lives with the executor; this package is the
cross-run store of docs/memory.md. See docs/memory.md for the algorithms.

Every entry is embedded (numpy vectors), so the whole package needs the ``vector`` extra:
importing it without numpy raises the named ``extra.missing`` error (exit 2), whichever
command or task got here, instead of an ``ImportError``.
"""

from agentctl.extras import require

require("vector")

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
