"""Past-conversation retrieval (context processors, ConversationRetriever;
docs/decisions/009-carried-over-requirements.md), stage by stage and as a pipeline, on a real store with
summary vectors from the fake embedder (dim 32)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from klaw.config import RagConfig
from klaw.llm.tokens import approximate_token_count
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.past_conversations.block import HEADER, fit_block
from klaw.memory.past_conversations.pipeline import Pipeline, Retrieval, ShownExchange, ShownSegment
from klaw.memory.past_conversations.retriever import PastConversationRetriever, default_pipeline
from klaw.memory.past_conversations.stages import (
    EmbedQuery,
    FormatBlock,
    PastSegmentsGuard,
    SimilarExchanges,
    SimilarSegments,
)
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.records import Summary, SummaryHit, SummaryKind
from tests.memory.summary_helpers import ALICE, T0, Turns

DIM = 32
QUERY = "what water temperature should I use to brew green tea?"
SETTINGS = RagConfig(min_similarity=0.3)


class CountingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__(DIM)
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return await super().embed(texts)


class BrokenEmbedder(FakeEmbedder):
    async def embed(self, texts: Sequence[str]) -> Any:
        raise RuntimeError(f"cannot embed {texts[0]}")


@dataclass
class Past:
    store: SqliteStore
    tea_segment: int
    tea_exchange: int
    oolong_exchange: int
    bike_segment: int
    current: int


def saved(summary: Summary | None) -> Summary:
    """A summary just written; the store returns None only when its exchange was forgotten meanwhile."""
    assert summary is not None
    return summary


async def embed_summaries(store: SqliteStore, summaries: Sequence[Summary]) -> None:
    vectors = await FakeEmbedder(DIM).embed([s.text for s in summaries])
    await store.summaries.put_vectors([(s.id, vectors[i]) for i, s in enumerate(summaries)])


async def past_segments(store: SqliteStore) -> Past:
    """Three closed segments (tea, bike, taxes), each with embedded summaries, then a current one."""
    await store.summaries.bind_embedder(FakeEmbedder(DIM).model_id, DIM)
    turns = Turns(store)
    topics = {
        "tea": [
            ("how do I brew green tea", "The person asked how to brew green tea and at what water temperature."),
            ("oolong?", "The person asked how long to steep oolong tea."),
        ],
        "bike": [("my chain squeaks", "The person asked how to oil a squeaking bike chain.")],
        "taxes": [("deductions?", "The person asked which expenses are deductible on income taxes.")],
    }
    segment_text = {
        "tea": "Talked about brewing green tea: water temperature, steeping time and oolong tea.",
        "bike": "Talked about bike maintenance: chain oil and tyre pressure for a road bike.",
        "taxes": "Talked about filing income taxes and deductible expenses.",
    }
    ids: dict[str, tuple[int, list[int]]] = {}
    written: list[Summary] = []
    for topic, exchanges in topics.items():
        exchange_ids = []
        for question, summary in exchanges:
            exchange = await turns.turn(question, "answered")
            written.append(saved(await store.summaries.save_exchange_summary(exchange, summary, "m", T0)))
            exchange_ids.append(exchange.id)
        segment = (await store.exchanges.get(exchange_ids[0])).segment_id  # type: ignore[union-attr]
        written.append(
            saved(
                await store.summaries.save_segment_summary(
                    segment,
                    segment_text[topic],
                    "m",
                    final=True,
                    covers_exchange_id=exchange_ids[-1],
                    exchanges_covered=len(exchange_ids),
                    at=T0,
                )
            )
        )
        ids[topic] = (segment, exchange_ids)
        await turns.new_segment()
    await embed_summaries(store, written)
    current = (await store.segments.current(ALICE)).id
    return Past(store, ids["tea"][0], ids["tea"][1][0], ids["tea"][1][1], ids["bike"][0], current)


def start(past: Past, settings: RagConfig = SETTINGS, budget: int = 1000) -> Retrieval:
    return Retrieval(ALICE, past.current, QUERY, settings, budget)


async def test_guard_stops_before_embedding_when_the_chat_has_no_past_segment(store: SqliteStore) -> None:
    await store.summaries.bind_embedder(FakeEmbedder(DIM).model_id, DIM)
    current = (await store.segments.current(ALICE)).id
    embedder = CountingEmbedder()
    pipeline = default_pipeline(store, embedder)
    result = await pipeline.run(Retrieval(ALICE, current, QUERY, SETTINGS, 1000))
    assert result.done and result.skipped_by == "guard" and result.block is None and embedder.calls == 0
    alone = await PastSegmentsGuard(store)(Retrieval(ALICE, current, QUERY, SETTINGS, 1000))
    assert alone.done


async def test_embed_query_stage_alone(store: SqliteStore) -> None:
    result = await EmbedQuery(FakeEmbedder(DIM))(Retrieval(ALICE, 1, QUERY, SETTINGS, 100))
    assert result.vector is not None and result.vector.shape == (DIM,)
    assert np.allclose(result.vector, (await FakeEmbedder(DIM).embed([QUERY]))[0])


async def test_similar_segments_stage_never_returns_the_current_segment(store: SqliteStore) -> None:
    past = await past_segments(store)
    # The current segment with a final summary identical to the query: the best match, yet excluded.
    same = await store.summaries.save_segment_summary(
        past.current, QUERY, "m", final=True, covers_exchange_id=None, exchanges_covered=0, at=T0
    )
    await embed_summaries(store, [saved(same)])
    embedded = await EmbedQuery(FakeEmbedder(DIM))(start(past))
    result = await SimilarSegments(store)(embedded)
    assert [hit.summary.segment_id for hit in result.segments] == [past.tea_segment]
    assert result.segments[0].similarity >= SETTINGS.min_similarity
    loose = await SimilarSegments(store)(embedded.replace(settings=RagConfig(min_similarity=0.0, conversation_limit=2)))
    assert len(loose.segments) == 2 and past.current not in {h.summary.segment_id for h in loose.segments}
    similarities = [hit.similarity for hit in loose.segments]
    assert similarities == sorted(similarities, reverse=True) and similarities[0] > similarities[1]
    strict = await SimilarSegments(store)(embedded.replace(settings=RagConfig(min_similarity=0.99)))
    assert strict.done and strict.skipped_by == "segments" and strict.segments == ()


async def test_similar_exchanges_stage_keeps_the_closest_per_segment_above_the_threshold(store: SqliteStore) -> None:
    past = await past_segments(store)
    embedded = await EmbedQuery(FakeEmbedder(DIM))(start(past))
    segments = await SimilarSegments(store)(embedded)
    one = await SimilarExchanges(store)(
        segments.replace(settings=RagConfig(min_similarity=0.0, exchange_limit_per_conversation=1))
    )
    assert [hit.summary.exchange_id for hit in one.exchanges] == [past.tea_exchange]
    result = await SimilarExchanges(store)(segments)
    assert [hit.summary.exchange_id for hit in result.exchanges] == [past.tea_exchange]  # oolong is below 0.3
    assert all(hit.similarity >= SETTINGS.min_similarity for hit in result.exchanges)


async def test_the_block_lists_ids_dates_and_similarities(store: SqliteStore) -> None:
    """The segment-first path alone (its messages found directly: `test_past_messages.py`)."""
    past = await past_segments(store)
    result = await default_pipeline(store, FakeEmbedder(DIM)).without("messages").run(start(past))
    assert result.block is not None and result.skipped_by is None
    lines = result.block.splitlines()
    assert lines[0] == HEADER
    segment_similarity = result.segments[0].similarity
    exchange_similarity = result.exchanges[0].similarity
    assert lines[1] == (
        f"- segment {past.tea_segment} (2026-03-01, similarity {segment_similarity:.2f}): Talked about brewing green"
        " tea: water temperature, steeping time and oolong tea."
    )
    assert lines[2].startswith(
        f"  - exchange {past.tea_exchange} (2026-03-01 09:00 UTC, similarity {exchange_similarity:.2f}):"
    )
    assert len(lines) == 3
    assert [s.segment_id for s in result.shown] == [past.tea_segment]


async def test_the_block_stays_within_its_token_budget(store: SqliteStore) -> None:
    past = await past_segments(store)
    room = approximate_token_count(HEADER) + 35  # the best segment's line and nothing more
    loose = RagConfig(min_similarity=0.0, max_tokens=room)
    result = await default_pipeline(store, FakeEmbedder(DIM)).run(start(past, loose))
    assert result.block is not None and approximate_token_count(result.block) <= room
    assert len(result.block.splitlines()) == 2 and len(result.shown) == 1 and result.shown[0].exchanges == ()
    budget = room + 30  # the context builder's room is lower than rag.maxTokens: it wins
    tighter = await default_pipeline(store, FakeEmbedder(DIM)).run(start(past, RagConfig(min_similarity=0.0), budget))
    assert tighter.block is not None and approximate_token_count(tighter.block) <= budget
    none = await FormatBlock()(tighter.replace(budget_tokens=10))
    assert none.block is None and none.shown == ()


async def test_a_stage_can_be_switched_off(store: SqliteStore) -> None:
    past = await past_segments(store)
    pipeline = default_pipeline(store, FakeEmbedder(DIM)).without("exchanges")
    assert pipeline.names == ("guard", "names", "embed_query", "messages", "segments", "format")
    result = await pipeline.run(start(past))
    assert result.block is not None and "  - exchange" not in result.block and result.exchanges == ()
    with pytest.raises(ValueError, match="no stage named nope"):
        pipeline.without("nope")


@dataclass
class OnlySegment:
    """A stage of the test's own, to insert: keeps one segment of those found."""

    segment_id: int
    name: str = "only"

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        kept = tuple(hit for hit in retrieval.segments if hit.summary.segment_id == self.segment_id)
        return retrieval.replace(segments=kept) if kept else retrieval.finish(self.name)


async def test_a_stage_can_be_inserted_without_touching_the_others(store: SqliteStore) -> None:
    past = await past_segments(store)
    stages = default_pipeline(store, FakeEmbedder(DIM)).stages
    pipeline = Pipeline([*stages[:5], OnlySegment(past.bike_segment), *stages[5:]]).without("messages")
    assert pipeline.names == ("guard", "names", "embed_query", "segments", "only", "exchanges", "format")
    loose = RagConfig(min_similarity=0.0, conversation_limit=3)
    assert past.bike_segment in {
        hit.summary.segment_id for hit in (await pipeline.without("only").run(start(past, loose))).segments
    }
    result = await pipeline.run(start(past, loose))
    assert [hit.summary.segment_id for hit in result.segments] == [past.bike_segment]
    assert [shown.segment_id for shown in result.shown] == [past.bike_segment]
    assert result.block is not None and f"segment {past.tea_segment} " not in result.block
    stopped = await Pipeline([*stages[:4], OnlySegment(past.current), *stages[4:]]).run(start(past, loose))
    assert stopped.skipped_by == "only" and stopped.block is None


async def test_retriever_is_fail_safe_and_switchable(store: SqliteStore, caplog: pytest.LogCaptureFixture) -> None:
    past = await past_segments(store)
    settings = {"now": SETTINGS}
    retriever = PastConversationRetriever(store, FakeEmbedder(DIM), lambda: settings["now"])
    found = await retriever.retrieve(ALICE, past.current, QUERY, 500)
    assert found is not None and found.block is not None
    assert await retriever.retrieve(ALICE, past.current, QUERY, 0) is None
    settings["now"] = RagConfig(enabled=False)
    assert not retriever.enabled and await retriever.retrieve(ALICE, past.current, QUERY, 500) is None
    settings["now"] = SETTINGS
    broken = PastConversationRetriever(store, BrokenEmbedder(DIM), lambda: SETTINGS)
    assert await broken.retrieve(ALICE, past.current, QUERY, 500) is None
    assert "RuntimeError" in caplog.text and "green tea" not in caplog.text


def hit(kind: SummaryKind, text: str, similarity: float, segment: int = 1, exchange: int | None = None) -> SummaryHit:
    moment = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    summary = Summary(1, kind, ALICE, segment, exchange, text, "m", True, exchange, 1, moment, moment)
    return SummaryHit(summary, similarity)


def test_fit_block_shortens_the_line_that_does_not_fit_and_stops() -> None:
    moment = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    long_text = " ".join(f"word{i}" for i in range(200))
    segments = [
        ShownSegment(
            hit(SummaryKind.SEGMENT, "first segment", 0.9, 7),
            moment,
            (ShownExchange(hit(SummaryKind.EXCHANGE, long_text, 0.8, 7, 70), moment),),
        ),
        ShownSegment(hit(SummaryKind.SEGMENT, "second segment", 0.8, 8), moment),
    ]
    block, shown = fit_block(segments, 120)
    assert block is not None and approximate_token_count(block) <= 120
    lines = block.splitlines()
    assert lines[1] == "- segment 7 (2026-01-02, similarity 0.90): first segment"
    assert lines[2].startswith("  - exchange 70 (2026-01-02 03:04 UTC, similarity 0.80): word0 word1") and lines[
        2
    ].endswith("…")
    assert len(lines) == 3 and [s.segment_id for s in shown] == [7]
    whole, _ = fit_block(segments[1:], 1000)
    assert whole == f"{HEADER}\n- segment 8 (2026-01-02, similarity 0.80): second segment"
