"""Small embedders around `FakeEmbedder` that fail or block on purpose, for the embedding queue's tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.protocol import EmbedderError, Vectors

DIM = 32


class StubEmbedder:
    """`FakeEmbedder(32)` that records every batch, raises `error` for the next `failures` calls,
    and, while `gate` is not set, waits for it before answering."""

    def __init__(self, *, failures: int = 0, error: Exception | None = None, blocked: bool = False) -> None:
        self._inner = FakeEmbedder(DIM)
        self.failures = failures
        self.error = error or EmbedderError("the embedding server at http://localhost:1 is down")
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        if not blocked:
            self.gate.set()
        self.entered = asyncio.Event()  # set when a call is waiting at (or went through) the gate

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        self.entered.set()
        await self.gate.wait()
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        return await self._inner.embed(texts)

    async def aclose(self) -> None:
        return None
