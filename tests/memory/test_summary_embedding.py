"""Summary embeddings through the durable queue (EmbeddingPipeline,
docs/decisions/009-carried-over-requirements.md): batches of at most 100 texts to the OpenAI-protocol
embeddings endpoint, stored atomically, 1–32 s backoff, then a permanent `failed` state counted per target."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import apsw
import numpy as np
import pytest

from klaw.config import EmbedderConfig
from klaw.engine.clock import ManualClock
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.embedder.openai_embedder import OpenAiEmbedder
from klaw.memory.embedding_queue import BACKOFF_SECONDS, EmbeddingQueue
from klaw.store.records import Exchange
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.records import SUMMARY_TARGET
from klaw.store.summaries.sqlite.vectors import insert_vectors
from tests.memory.summary_helpers import T0, Turns

DIM = 16


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAiServer]:
    async with FakeOpenAiServer(embedding_dim=DIM) as running:
        yield running


@pytest.fixture
async def embedder(server: FakeOpenAiServer) -> AsyncIterator[OpenAiEmbedder]:
    config = EmbedderConfig(backend="openai", base_url=server.base_url, model="fake-embed", dim=DIM, batch_size=256)
    opened = OpenAiEmbedder(config, max_retries=0)
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock, embedder: OpenAiEmbedder) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "klaw.db", clock=clock.now)
    await opened.vectors.bind_embedder(embedder.model_id, DIM)
    await opened.summaries.bind_embedder(embedder.model_id, DIM)
    try:
        yield opened
    finally:
        await opened.aclose()


async def summarized_exchanges(store: SqliteStore, count: int) -> list[Exchange]:
    turns = Turns(store)
    exchanges = []
    for i in range(count):
        exchange = await turns.turn(f"question {i}", f"answer {i}")
        await store.summaries.save_exchange_summary(exchange, f"The person asked question {i}.", "m", T0)
        exchanges.append(exchange)
    return exchanges


def embedding_inputs(server: FakeOpenAiServer) -> list[list[str]]:
    return [r.body["input"] for r in server.requests if r.path.endswith("/embeddings")]


async def test_summaries_are_embedded_in_calls_of_at_most_100_texts(
    store: SqliteStore, server: FakeOpenAiServer, embedder: OpenAiEmbedder, clock: ManualClock
) -> None:
    await summarized_exchanges(store, 150)
    queue = EmbeddingQueue(store, embedder, clock, batch_size=256)  # more than the cap
    assert await queue.run_until_idle() == 150
    sizes = [len(texts) for texts in embedding_inputs(server)]
    assert sizes == [100, 50]
    assert (await store.summaries.counts()).vectors == 150
    assert await store.embedding_jobs.by_target() == []


async def test_failed_summary_embeddings_back_off_then_stay_failed_and_counted(
    store: SqliteStore, server: FakeOpenAiServer, embedder: OpenAiEmbedder, clock: ManualClock
) -> None:
    await summarized_exchanges(store, 2)
    for _ in range(len(BACKOFF_SECONDS) + 1):
        server.reply_error(503, endpoint="embeddings")
    queue = EmbeddingQueue(store, embedder, clock, batch_size=16)
    assert await queue.run_until_idle() == 0
    for delay in BACKOFF_SECONDS:
        [job, _] = await store.embedding_jobs.due(clock.now() + timedelta(days=1), 10)
        assert (job.next_attempt_at - clock.now()).total_seconds() == delay
        await clock.advance(delay)
        assert await queue.run_until_idle() == 0
    [summary_jobs] = await store.embedding_jobs.by_target()
    assert (summary_jobs.target, summary_jobs.pending, summary_jobs.failed) == (SUMMARY_TARGET, 0, 2)
    assert summary_jobs.last_error is not None and "503" in summary_jobs.last_error
    assert await store.embedding_jobs.retry_failed() == 2
    assert await queue.run_until_idle() == 2
    assert (await store.summaries.counts()).vectors == 2


async def test_a_batch_of_summary_vectors_is_stored_whole_or_not_at_all(store: SqliteStore) -> None:
    await summarized_exchanges(store, 3)
    good = np.ones(DIM, dtype=np.float32).tobytes()
    bad = np.ones(DIM + 1, dtype=np.float32).tobytes()  # sqlite-vec refuses the wrong size

    def insert(connection: apsw.Connection) -> int:
        return insert_vectors(connection, [(1, good), (2, bad), (3, good)], "fake-embed", DIM)

    with pytest.raises(apsw.Error):
        await store.db.run(insert)
    assert (await store.summaries.counts()).vectors == 0
    vector = np.full(DIM, 0.25, dtype=np.float32)
    assert await store.summaries.put_vectors([(1, vector), (2, vector), (3, vector)]) == 3


async def test_a_rebuild_drops_summary_vectors_and_queues_every_summary_again(
    store: SqliteStore, embedder: OpenAiEmbedder, clock: ManualClock
) -> None:
    await summarized_exchanges(store, 3)
    queue = EmbeddingQueue(store, embedder, clock, batch_size=16)
    assert await queue.run_until_idle() == 3
    assert await store.summaries.reembed_all() == 3
    assert (await store.summaries.counts()).vectors == 0
    assert await queue.run_until_idle() == 3
    assert (await store.summaries.counts()).vectors == 3
