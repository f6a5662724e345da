"""Hybrid search over a chat's saved memories: vector KNN and FTS5 bm25 over `memory_chunks`, fused by RRF.

The same recipe as `HybridSearch` over messages (which stays the one path for messages), on the
archival table: each side fetches its best candidates, `reciprocal_rank_fusion` merges them by
position. Chunk rowids are rowids of their `memory_saved` records, so they never collide with the
rowids of messages a caller may fuse them with.

The vector side degrades like the messages' one: an embedder or vector failure logs a warning
naming the error type (never the text) and the search goes on with full text alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from klaw.memory.embedder.protocol import Embedder, embed_queries
from klaw.memory.fusion import reciprocal_rank_fusion
from klaw.store.archival_records import MemoryChunk, MemoryHit
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)

DEFAULT_CANDIDATES = 20


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """One memory found: fused RRF score (higher is better), cosine distance (None: not found by
    meaning) and 1-based full-text rank (None: not found by words)."""

    chunk: MemoryChunk
    score: float
    distance: float | None = None
    fts_rank: int | None = None


class ChunkSearch:
    """`embedder=None` searches full text only."""

    def __init__(self, store: Storage, embedder: Embedder | None) -> None:
        self._store = store
        self._embedder = embedder

    async def search(self, chat: ChatRef, text: str, *, limit: int = DEFAULT_CANDIDATES) -> list[ChunkHit]:
        """The chat's memories matching `text`, best first: the best `limit` of each side, fused."""
        if not text.strip() or limit <= 0:
            return []
        by_vector = await self._vector_side(chat, text, limit)
        by_text = await self._store.memory_chunks.full_text(chat, text, limit=limit)
        chunks = {hit.chunk.rowid: hit.chunk for hit in [*by_vector, *by_text]}
        distances = {hit.chunk.rowid: hit.score for hit in by_vector}
        ranks = {hit.chunk.rowid: rank for rank, hit in enumerate(by_text, start=1)}
        fused = reciprocal_rank_fusion([[h.chunk.rowid for h in by_vector], [h.chunk.rowid for h in by_text]])
        return [
            ChunkHit(chunks[item.rowid], item.score, distances.get(item.rowid), ranks.get(item.rowid)) for item in fused
        ]

    async def _vector_side(self, chat: ChatRef, text: str, limit: int) -> list[MemoryHit]:
        if self._embedder is None:
            return []
        try:
            vectors = await embed_queries(self._embedder, [text])
            hits = await self._store.memory_chunks.nearest(chat, vectors[0], limit=limit)
        except Exception as exc:
            log.warning("memory search: vector side unavailable (%s); using full text only", type(exc).__name__)
            return []
        return sorted(hits, key=lambda hit: hit.score)
