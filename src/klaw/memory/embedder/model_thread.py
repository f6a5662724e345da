"""The one thread a local embedder's model runs on (MiniLM, e5).

All model work runs there: `embed` never blocks the event loop, and concurrent calls queue instead of
fighting over the cores the BLAS library or onnxruntime already use for each matmul. The model is
loaded lazily on that thread too, so the load cannot race with itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from klaw.memory.embedder.protocol import EmbedderError, Vectors


class ModelThread:
    """`run` a batch on the thread; after `aclose` every call raises that `label`'s embedder is closed."""

    def __init__(self, label: str, thread_name: str) -> None:
        self._closed = f"This {label} embedder is closed."
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)

    async def run(self, work: Callable[[list[str]], Vectors], texts: list[str], dim: int) -> Vectors:
        """`work(texts)` on the thread; no texts: an empty [0, dim] array, without a call."""
        executor = self._executor
        if executor is None:
            raise EmbedderError(self._closed)
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
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
