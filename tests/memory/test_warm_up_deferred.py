"""A deferred warm-up (an engine for one piped message, decision 499): nothing loads until a query waits for
it; that wait begins the load and still ends before the query's own deadline starts (decision 260)."""

from __future__ import annotations

import asyncio
from typing import cast

import numpy as np

from klaw.memory.embedder.memo import QueryMemo
from klaw.memory.embedder.protocol import Embedder, Vectors
from klaw.memory.embedder.warm_up import WarmUp


class SlowLoad:
    """An embedder whose load takes `load_seconds`, counted once, like MiniLM's first call."""

    model_id = "slow-load"
    dim = 2

    def __init__(self, load_seconds: float) -> None:
        self.load_seconds = load_seconds
        self.loads = 0
        self.loaded = asyncio.Event()

    async def warm_up(self) -> None:
        self.loads += 1
        await asyncio.sleep(self.load_seconds)
        self.loaded.set()

    async def embed(self, texts: list[str]) -> Vectors:
        await self.loaded.wait()
        return np.ones((len(texts), self.dim), dtype=np.float32)

    async def aclose(self) -> None:
        return None


async def test_a_deferred_warm_up_loads_nothing_until_a_query_waits() -> None:
    embedder = SlowLoad(0.0)
    warm = WarmUp.start(cast(Embedder, embedder), now=False)
    await asyncio.sleep(0.05)
    assert (embedder.loads, warm.done) == (0, False)  # not begun, and not done: a query would begin it
    await warm.wait()
    assert (embedder.loads, warm.done) == (1, True)
    await warm.aclose()


async def test_a_query_begins_a_deferred_load_and_its_deadline_does_not_count_it() -> None:
    """The load takes 0.3 s, the query's deadline is 0.1 s: the vector comes, no EmbedderError."""
    embedder = SlowLoad(0.3)
    warm = WarmUp.start(cast(Embedder, embedder), now=False)
    memo = QueryMemo(cast(Embedder, embedder), deadline_seconds=0.1, warm_up=warm)
    vectors = await memo.embed(["what is my cat called?"])
    assert vectors.shape == (1, 2) and embedder.loads == 1
    await memo.aclose()
    await warm.aclose()


async def test_a_closed_deferred_warm_up_never_begins() -> None:
    embedder = SlowLoad(0.0)
    warm = WarmUp.start(cast(Embedder, embedder), now=False)
    await warm.aclose()
    await warm.wait()
    assert (embedder.loads, warm.done) == (0, True)
