"""The local embedders' model thread lets calls take turns: a search's query waits behind one chunk of a
long background batch (the docs index's first build, a reindex), not behind the whole batch; a live embedding
queue's batch goes behind the turns' texts, a text at a time (decision 508).

The work function stands in for the model (it records which texts it was given, in order), so the test
sees exactly what the thread ran when.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from klaw.engine.clock import ManualClock
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder import model_thread
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.model_thread import CHUNK_CHARS, ModelThread, chunks, in_background
from klaw.memory.embedder.protocol import EmbedderError, Vectors
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

LONG = "x" * (CHUNK_CHARS // 2 + 1)  # two of these never share a chunk


async def test_a_query_runs_after_one_chunk_of_a_long_batch_not_after_the_whole_batch() -> None:
    thread = ModelThread("test", "klaw-test")
    ran: list[str] = []
    first_started = threading.Event()
    release = threading.Event()

    def work(texts: list[str]) -> Vectors:
        if not ran:
            first_started.set()
            release.wait(10)  # the first chunk of the batch holds the thread until the query is queued
        ran.extend("L" if text == LONG else text for text in texts)
        return np.zeros((len(texts), 2), dtype=np.float32)

    batch = asyncio.create_task(thread.run(work, [LONG] * 6, 2))
    await asyncio.to_thread(first_started.wait, 10)
    query = asyncio.create_task(thread.run(work, ["q"], 2))
    await asyncio.sleep(0.05)  # the query is on the thread's queue behind the running chunk
    release.set()
    vectors, answer = await asyncio.gather(batch, query)
    assert ran == ["L", "q", "L", "L", "L", "L", "L"]
    assert vectors.shape == (6, 2) and answer.shape == (1, 2)
    await thread.aclose()


async def test_chunks_keep_the_order_and_put_a_long_text_alone() -> None:
    texts = ["a" * 500, "b" * 500, "c" * 500, "d" * (CHUNK_CHARS * 2), "e"]
    assert chunks(texts) == [["a" * 500, "b" * 500], ["c" * 500], ["d" * (CHUNK_CHARS * 2)], ["e"]]
    assert chunks([]) == []


async def test_a_closed_thread_refuses_even_an_empty_call() -> None:
    thread = ModelThread("test", "klaw-test")
    await thread.aclose()
    with pytest.raises(EmbedderError, match="closed"):
        await thread.run(lambda texts: np.zeros((len(texts), 2), dtype=np.float32), [], 2)


SHORT = ["reply one", "summary one", "reply two", "summary two"]


async def test_a_turns_vector_goes_after_the_background_text_under_way_not_after_the_whole_batch() -> None:
    """Decision 508: the embedding queue's batch (the previous turn's reply and summary) held the thread in
    one chunk, and the next message's vector, started at its accept, waited for all of it."""
    thread = ModelThread("test", "klaw-test")
    ran: list[list[str]] = []
    first_started = threading.Event()
    release = threading.Event()

    def work(texts: list[str]) -> Vectors:
        if not ran:
            first_started.set()
            release.wait(10)  # the batch's first text holds the thread until the turn's text is queued
        ran.append(list(texts))
        return np.zeros((len(texts), 2), dtype=np.float32)

    async def background_batch() -> Vectors:
        with in_background():
            return await thread.run(work, SHORT, 2)

    batch = asyncio.create_task(background_batch())
    await asyncio.to_thread(first_started.wait, 10)
    query = asyncio.create_task(thread.run(work, ["the next message"], 2))
    await asyncio.sleep(0.05)  # queued behind the text under way, beside the batch's other three
    release.set()
    vectors, answer = await asyncio.gather(batch, query)
    assert ran == [["reply one"], ["the next message"], ["summary one"], ["reply two"], ["summary two"]]
    assert vectors.shape == (4, 2) and answer.shape == (1, 2)
    await thread.aclose()


async def test_a_cancelled_background_batch_leaves_the_texts_not_begun() -> None:
    thread = ModelThread("test", "klaw-test")
    ran: list[str] = []
    first_started = threading.Event()
    release = threading.Event()

    def work(texts: list[str]) -> Vectors:
        if not ran:
            first_started.set()
            release.wait(10)
        ran.extend(texts)
        return np.zeros((len(texts), 2), dtype=np.float32)

    async def background_batch() -> Vectors:
        with in_background():
            return await thread.run(work, SHORT, 2)

    batch = asyncio.create_task(background_batch())
    await asyncio.to_thread(first_started.wait, 10)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch  # ends at once: the text under way is left to finish, the others are dropped
    release.set()
    assert (await thread.run(work, ["after"], 2)).shape == (1, 2)
    assert ran == ["reply one", "after"]  # the text under way finished; the three not begun never ran
    await thread.aclose()


async def test_a_live_queues_batch_runs_in_the_background_and_a_reindexs_does_not(tmp_path: Path) -> None:
    """The embedding queue of an engine (turns to wait for) embeds behind the turns' own texts; a reindex's
    queue (no turns) keeps the thread's chunks and order."""
    seen: list[bool] = []

    class Recording(FakeEmbedder):
        async def embed(self, texts: Sequence[str]) -> Vectors:
            seen.append(model_thread._background.get())
            return await super().embed(texts)

    clock = ManualClock()
    store = await SqliteStore.open(tmp_path / "klaw.db", clock=clock.now)
    try:
        embedder = Recording(8)
        await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
        ingestion = Ingestion(ConversationLog(tmp_path / "conversations"), store, min_embed_tokens=1)
        chat = ChatRef("console", "me")
        await ingestion.accept(MessageRecord(chat, Role.USER, "where did I leave the spare key last week"))

        async def quiet() -> bool:
            return True

        assert await EmbeddingQueue(store, embedder, clock, batch_size=8, between_turns=quiet).run_until_idle() == 1
        await ingestion.accept(MessageRecord(chat, Role.USER, "and the blue flower pot by the door"))
        assert await EmbeddingQueue(store, embedder, clock, batch_size=8).run_until_idle() == 1
        assert seen == [True, False]
    finally:
        await store.aclose()
