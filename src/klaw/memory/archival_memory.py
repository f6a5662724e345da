"""Archival memory: what the agent saves on purpose (`memory_save`), and one search (`memory_search`)
over those memories and over every past message of the chat, in any segment.

A saved memory is a `memory_saved` record: logged (so `klaw reindex` rebuilds it) and folded by the
store into `memory_chunks` with its embedding job in the same transaction, so it is found by full
text at once and by meaning once the embedding queue has caught up. Saving the same text twice in
a chat keeps one memory.

The search runs `ChunkSearch` over memories and `HybridSearch` (the one path for messages) over the
whole chat, each vector + full text fused by RRF, then fuses the two rankings by RRF again: the
best memory and the best message come first, whatever their scales. Messages the context already
shows (the current window) can be left out. Other chats are never searched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from klaw.errors import KlawError
from klaw.memory.chunk_search import ChunkHit, ChunkSearch
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.fusion import reciprocal_rank_fusion
from klaw.memory.hybrid_search import HybridHit, HybridSearch
from klaw.memory.ingestion import Ingestion
from klaw.store.archival_records import memory_saved_record, shown_memory_id
from klaw.store.records import ChatRef

CANDIDATES = 20  # per side and per corpus, before fusion
SAVE_TOOL = "memory_save"  # the tool that calls `save`: forgetting a memory erases its calls too


class ArchivalError(KlawError, ValueError):
    """A save or search that was refused; the message says why (for the model)."""


@dataclass(frozen=True)
class SavedMemory:
    memory_id: str  # as shown: the start of its log record's id, kept by every rebuild (decision 245)
    created: bool  # False: the chat already had a memory with exactly this text


@dataclass(frozen=True)
class ArchivalResult:
    """One memory or message found. `score` is the final fused score (higher is better); `distance`
    (cosine, lower is closer) and `fts_rank` say which side found it, as in `HybridHit`."""

    kind: Literal["memory", "message"]
    id: int | str  # a memory's id as shown (str), or the message's rowid (int)
    text: str
    created_at: datetime
    segment_id: int
    score: float
    distance: float | None
    fts_rank: int | None
    role: str | None = None  # messages: user or assistant
    exchange_id: int | None = None  # messages: the exchange it belongs to, when it has one


class ArchivalMemory:
    def __init__(
        self,
        ingestion: Ingestion,
        embedder: Embedder | None,
        clock: Callable[[], datetime],
        *,
        max_chars: int,
        messages: HybridSearch | None = None,
        relevance_threshold: float | None = None,
    ) -> None:
        """`messages` is the engine's hybrid search over messages (tuned as for auto-RAG); default: one
        with default settings on the same store and embedder. `relevance_threshold` (a cosine
        distance, auto-RAG's) drops what only the vector side found farther than it: nearest
        neighbours always exist, and unrelated ones would only mislead."""
        self._ingestion = ingestion
        self._store = ingestion.store
        self._clock = clock
        self._max_chars = max_chars
        self._threshold = relevance_threshold
        self._chunks = ChunkSearch(self._store, embedder)
        self._messages = messages or HybridSearch(self._store, embedder)

    async def save(self, chat: ChatRef, text: str) -> SavedMemory:
        content = text.strip()
        if not content:
            raise ArchivalError("the memory is empty: give the text to keep")
        if len(content) > self._max_chars:
            raise ArchivalError(
                f"the memory has {len(content)} characters; one memory may have at most {self._max_chars}"
                " (memory.saveMaxChars): save the essentials, or several memories"
            )
        existing = await self._store.memory_chunks.find(chat, content)
        if existing is not None:
            return SavedMemory(existing.memory_id, created=False)
        stored = await self._ingestion.accept(memory_saved_record(chat, content, self._clock()))
        if self._ingestion.on_embedding_queued is not None:
            self._ingestion.on_embedding_queued()  # the fold queued the chunk's embedding job
        return SavedMemory(shown_memory_id(stored.record.id), created=True)

    async def search(self, chat: ChatRef, text: str, *, limit: int, skip_recent: int = 0) -> list[ArchivalResult]:
        """The best `limit` memories and messages of the chat for `text`. `skip_recent` leaves out the
        last messages of the current segment (the sliding window the model already sees)."""
        if not text.strip():
            raise ArchivalError("the query is empty: say what to look for")
        exclude: set[int] = set()
        if skip_recent > 0:
            segment = await self._store.segments.current(chat)
            exclude = {m.rowid for m in await self._store.messages.window(segment.id, skip_recent)}
        chunk_hits = await self._chunks.search(chat, text, limit=CANDIDATES)
        message_hits = await self._messages.search(chat, text, limit=CANDIDATES, exclude=exclude)
        chunks = {hit.chunk.rowid: hit for hit in chunk_hits if self._relevant(hit.distance, hit.fts_rank)}
        messages = {hit.message.rowid: hit for hit in message_hits if self._relevant(hit.distance, hit.fts_rank)}
        fused = reciprocal_rank_fusion([list(chunks), list(messages)])[:limit]
        kept = [messages[item.rowid].message for item in fused if item.rowid in messages]
        exchanges = await self._store.history.exchange_ids(kept)
        results = []
        for item in fused:
            if item.rowid in chunks:
                results.append(_memory_result(chunks[item.rowid], item.score))
            else:
                results.append(_message_result(messages[item.rowid], item.score, exchanges.get(item.rowid)))
        return results

    def _relevant(self, distance: float | None, fts_rank: int | None) -> bool:
        """Found by words, or close enough in meaning (a hit found by neither is context around one)."""
        return self._threshold is None or fts_rank is not None or distance is None or distance <= self._threshold


def _memory_result(hit: ChunkHit, score: float) -> ArchivalResult:
    chunk = hit.chunk
    return ArchivalResult(
        "memory", chunk.memory_id, chunk.content, chunk.created_at, chunk.segment_id, score, hit.distance, hit.fts_rank
    )


def _message_result(hit: HybridHit, score: float, exchange_id: int | None) -> ArchivalResult:
    message = hit.message
    return ArchivalResult(
        "message",
        message.rowid,
        message.content,
        message.record.created_at,
        message.segment_id,
        score,
        hit.distance,
        hit.fts_rank,
        role=message.role.value,
        exchange_id=exchange_id,
    )
