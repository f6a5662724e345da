"""The stages of past-conversation retrieval, in their default order:

1. `PastSegmentsGuard` ("guard"): stop at once when the chat has no final summary of another segment
   (a new chat pays no query embedding);
2. `UnknownNames` ("names"): the names the new message asks about that the chat's past never said
   (`memory/unknown_names.py`); when there is one, meaning alone opens nothing below: whatever is
   similar is about something else, and only messages holding a rare word of the query are kept;
3. `EmbedQuery` ("embed_query"): the new message's vector;
4. `PastMessages` ("messages", `past_messages.py`): past segments' own messages found directly,
   kept by vector distance or rare names and codes, for the facts summaries leave out;
5. `SimilarSegments` ("segments"): the chat's final segment summaries closest to it, never the
   current segment's, at least `minSimilarity`, at most `conversationLimit` (none when the message
   names something unknown); the retrieval ends here when neither these nor the messages found
   anything;
6. `SimilarExchanges` ("exchanges"): in each of those segments, its closest exchange summaries, at
   least `minSimilarity`, at most `exchangeLimitPerConversation`;
7. `FormatBlock` ("format"): the block, fitted to the token budget: the segments of both paths
   ranked together by reciprocal rank fusion (similar summaries; segments of the messages found).

Each summary stage makes one store call (the names stage one bounded count per name); the messages
stage is one hybrid search and a few lookups.
"""

from __future__ import annotations

from klaw.memory.embedder.protocol import Embedder, embed_queries
from klaw.memory.fusion import reciprocal_rank_fusion
from klaw.memory.past_conversations.block import fit_block
from klaw.memory.past_conversations.pipeline import Retrieval, ShownExchange, ShownSegment
from klaw.memory.unknown_names import unknown_names
from klaw.memory.word_evidence import WordScope
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


class UnknownNames:
    name = "names"

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        scope = WordScope(retrieval.chat, before_segment_id=retrieval.current_segment_id)
        unknown = await unknown_names(self._store, scope, retrieval.query)
        return retrieval.replace(unknown_names=unknown) if unknown else retrieval


class EmbedQuery:
    name = "embed_query"

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        vectors = await embed_queries(self._embedder, [retrieval.query])
        return retrieval.replace(vector=vectors[0])


class SimilarSegments:
    name = "segments"

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        if retrieval.vector is None or retrieval.unknown_names:
            return retrieval if retrieval.messages else retrieval.finish(self.name)
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
        if not kept and not retrieval.messages:
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
        by_summary = {hit.summary.segment_id: hit for hit in retrieval.segments}
        by_messages = {hit.summary.segment_id: hit for hit in retrieval.message_segments}
        order = reciprocal_rank_fusion(
            [list(by_summary), list(dict.fromkeys(hit.message.segment_id for hit in retrieval.messages))]
        )
        segments = []
        for item in order:
            hit = by_summary.get(item.rowid) or by_messages.get(item.rowid)
            if hit is None:
                continue  # messages of a segment without a final summary: nothing to name it by
            segments.append(
                ShownSegment(
                    hit,
                    hit.started_at,
                    tuple(
                        ShownExchange(found, found.started_at)
                        for found in retrieval.exchanges
                        if found.summary.segment_id == item.rowid
                    ),
                    tuple(found for found in retrieval.messages if found.message.segment_id == item.rowid),
                    by_messages=item.rowid not in by_summary,
                )
            )
        budget = min(retrieval.settings.max_tokens, retrieval.budget_tokens)
        block, shown = fit_block(segments, budget)
        return retrieval.replace(block=block, shown=shown)
