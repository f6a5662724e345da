"""The local embedders' model thread lets calls take turns: a search's query waits behind one chunk of a
long background batch (the docs index's first build, a reindex), not behind the whole batch.

The work function stands in for the model (it records which texts it was given, in order), so the test
sees exactly what the thread ran when.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from klaw.memory.embedder.model_thread import CHUNK_CHARS, ModelThread, chunks
from klaw.memory.embedder.protocol import EmbedderError, Vectors

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
