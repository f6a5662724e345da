"""The stages of past-conversation retrieval, in their default order:

1. `PastSegmentsGuard` ("guard"): stop at once when the chat has no final summary of another segment
   (a new chat pays no query embedding);
2. `EmbedQuery` ("embed_query"): the new message's vector;
3. `SimilarSegments` ("segments"): the chat's final segment summaries closest to it, never the
   current segment's, at least `minSimilarity`, at most `conversationLimit`;
4. `SimilarExchanges` ("exchanges"): in each of those segments, its closest exchange summaries, at
   least `minSimilarity`, at most `exchangeLimitPerConversation`;
5. `FormatBlock` ("format"): the block, fitted to the token budget.

Each stage makes at most one store call: a retrieval is three round trips to the database.
"""

from __future__ import annotations

from klaw.memory.embedder.protocol import Embedder
from klaw.memory.past_conversations.block import fit_block
from klaw.memory.past_conversations.pipeline import Retrieval, ShownExchange, ShownSegment
from klaw.store.protocol import Storage


class PastSegmentsGuard:
    name = "guard"

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        if not retrieval.query.strip() or not await self._store.summaries.has_past_segments(
            retrieval.chat, exclude_segment_id=retrieval.current_segment_id
        ):
            return retrieval.finish(self.name)
        return retrieval


class EmbedQuery:
    name = "embed_query"

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        vectors = await self._embedder.embed([retrieval.query])
        return retrieval.replace(vector=vectors[0])


class SimilarSegments:
    name = "segments"

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        if retrieval.vector is None:
            return retrieval.finish(self.name)
        settings = retrieval.settings
        hits = await self._store.summaries.nearest_segments(
            retrieval.chat,
            retrieval.vector,
            limit=settings.conversation_limit,
            exclude_segment_id=retrieval.current_segment_id,
        )
        kept = tuple(
            hit
            for hit in hits
            if hit.similarity >= settings.min_similarity and hit.summary.segment_id != retrieval.current_segment_id
        )
        if not kept:
            return retrieval.finish(self.name)
        return retrieval.replace(segments=kept)


class SimilarExchanges:
    name = "exchanges"

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        if retrieval.vector is None:
            return retrieval
        settings = retrieval.settings
        hits = await self._store.summaries.nearest_exchanges(
            retrieval.chat,
            retrieval.vector,
            segment_ids=[segment.summary.segment_id for segment in retrieval.segments],
            limit_per_segment=settings.exchange_limit_per_conversation,
        )
        return retrieval.replace(exchanges=tuple(hit for hit in hits if hit.similarity >= settings.min_similarity))


class FormatBlock:
    name = "format"

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        segments = [
            ShownSegment(
                hit,
                hit.started_at,
                tuple(
                    ShownExchange(found, found.started_at)
                    for found in retrieval.exchanges
                    if found.summary.segment_id == hit.summary.segment_id
                ),
            )
            for hit in retrieval.segments
        ]
        budget = min(retrieval.settings.max_tokens, retrieval.budget_tokens)
        block, shown = fit_block(segments, budget)
        return retrieval.replace(block=block, shown=shown)
