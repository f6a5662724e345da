"""Past conversations for `klaw bench scale`: a chat's earlier segments with summaries, and the retriever.

Before the bench chat's big current segment is built, `add_past_segments` writes past segments closed
by `/new` records, each with exchanges, their exchange summaries and a final segment summary, through
the summary repository; vectors are random unit rows of the embedder's size (retrieval cost does not
depend on what they mean). `fill`, when given, writes each past segment's own messages first (`bench
scale --past-share`: a chat whose past is large, which the `messages` stage searches directly).
Retrieval is then timed through the production pipeline with the gate at 0, so every stage runs:
segment KNN, exchange ranking, dates, the block.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from klaw.config import RagConfig
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.past_conversations.retriever import PastConversationRetriever
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.store.summaries.records import Summary

PAST_SEGMENTS = 500
EXCHANGES_PER_SEGMENT = 20
BENCH_RAG = RagConfig(min_similarity=0.0)  # time the whole path: nothing cut by the gate
# Writes past segment `number`'s own messages from `moment` on; returns the time after the last.
SegmentFill = Callable[[int, datetime], Awaitable[datetime]]


@dataclass(frozen=True)
class PastHistory:
    segments: int
    summaries: int


async def add_past_segments(
    store: Storage,
    chat: ChatRef,
    rng: np.random.Generator,
    *,
    embedder_id: str,
    dim: int,
    start: datetime,
    segments: int = PAST_SEGMENTS,
    exchanges_per_segment: int = EXCHANGES_PER_SEGMENT,
    fill: SegmentFill | None = None,
) -> PastHistory:
    await store.summaries.bind_embedder(embedder_id, dim)
    moment = start
    written = 0
    for number in range(segments):
        segment = await store.segments.current(chat)
        if fill is not None:
            moment = await fill(number, moment)
        ids = []
        for turn in range(exchanges_per_segment):
            moment += timedelta(seconds=30)
            exchange = await store.exchanges.open(chat, segment.id, None, moment)
            await store.exchanges.close(exchange.id, ExchangeStatus.COMPLETED, None, moment)
            text = f"The person asked question {turn} of past conversation {number}; the assistant answered it."
            ids.append(_written(await store.summaries.save_exchange_summary(exchange, text, "bench", moment)).id)
        text = f"Past conversation {number}: {exchanges_per_segment} questions asked and answered."
        final = await store.summaries.save_segment_summary(
            segment.id,
            text,
            "bench",
            final=True,
            covers_exchange_id=None,
            exchanges_covered=exchanges_per_segment,
            at=moment,
        )
        ids.append(_written(final).id)
        vectors = rng.standard_normal((len(ids), dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        await store.summaries.put_vectors(list(zip(ids, vectors, strict=True)))
        written += len(ids)
        moment += timedelta(seconds=30)
        await store.messages.append(
            MessageRecord(chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=moment)
        )
    return PastHistory(segments, written)


def _written(summary: Summary | None) -> Summary:
    if summary is None:
        raise RuntimeError("a bench summary was not stored")
    return summary


def past_retriever(store: Storage, embedder: Embedder) -> PastConversationRetriever:
    return PastConversationRetriever(store, embedder, lambda: BENCH_RAG)
