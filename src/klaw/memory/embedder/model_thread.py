"""The one thread a local embedder's model runs on (MiniLM, e5).

All model work runs there: `embed` never blocks the event loop, and concurrent calls queue instead of
fighting over the cores the BLAS library or onnxruntime already use for each matmul. The model is
loaded lazily on that thread too, so the load cannot race with itself.

A call is run as chunks of about `CHUNK_CHARS` characters, each queued only when the one before it is
done, so calls take turns: a search's query waits behind at most one chunk of a long batch (the docs
index's first build, a reindex, a backlog of embedding jobs) instead of the whole batch. Measured
before this on 2 cores: the docs index's 32-section batches held the thread 6-7 s each, and every turn
of a fresh home's first minute waited that long for its query vector. A chunk of ~1,200 characters
(~300 tokens, at least one text) is ~0.2-0.3 s of MiniLM there, and big enough that batching loses
nothing: the model's cost is per token, and each chunk's texts are still padded together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from klaw.memory.embedder.protocol import EmbedderError, Vectors

CHUNK_CHARS = 1200


class ModelThread:
    """`run` a batch on the thread; after `aclose` every call raises that `label`'s embedder is closed."""

    def __init__(self, label: str, thread_name: str) -> None:
        self._closed = f"This {label} embedder is closed."
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)

    async def run(self, work: Callable[[list[str]], Vectors], texts: list[str], dim: int) -> Vectors:
        """`work(texts)` on the thread, chunk by chunk (`chunks`), in order; no texts: an empty [0, dim]
        array, without a call."""
        import numpy as np  # here: building an embedder (config check) embeds nothing (decision 437)

        if not texts:
            if self._executor is None:
                raise EmbedderError(self._closed)
            return np.zeros((0, dim), dtype=np.float32)
        parts = [await self._run_one(work, chunk) for chunk in chunks(texts)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _run_one(self, work: Callable[[list[str]], Vectors], texts: list[str]) -> Vectors:
        executor = self._executor
        if executor is None:
            raise EmbedderError(self._closed)
        try:
            future = executor.submit(work, texts)
        except RuntimeError as exc:  # shut down by a concurrent aclose()
            raise EmbedderError(self._closed) from exc
        return await asyncio.wrap_future(future)

    async def aclose(self) -> None:
        """Lets a running batch finish, waiting in a thread so the loop stays free."""
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True)


def chunks(texts: list[str], limit: int = CHUNK_CHARS) -> list[list[str]]:
    """`texts` cut, in order, into runs of at most `limit` characters (a longer text runs alone)."""
    out: list[list[str]] = []
    size = 0
    for text in texts:
        if out and size + len(text) <= limit:
            out[-1].append(text)
            size += len(text)
        else:
            out.append([text])
            size = len(text)
    return out
