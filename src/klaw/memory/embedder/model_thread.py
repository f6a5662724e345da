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

A live engine's embedding queue runs its calls `in_background()`: one text a chunk, and a chunk waiting
for the thread goes after every other call's (a turn's query, its message's vector started at accept).
Back-to-back turns had the previous turn's reply and summary on the thread when the next message's
vector was asked for, and the turn waited for the whole batch; now it waits for at most the one text
under way (decision 508). One text a chunk costs MiniLM nothing: 12.4-13.0 ms a short text singly or
in fours, measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar

from klaw.memory.embedder.protocol import EmbedderError, Vectors

CHUNK_CHARS = 1200

_Work = Callable[[list[str]], Vectors]
_Item = tuple[_Work, list[str], "Future[Vectors]"]

_background: ContextVar[bool] = ContextVar("klaw_background_embedding", default=False)


@contextlib.contextmanager
def in_background() -> Iterator[None]:
    """Within the block (and the tasks it starts), model work goes after everyone else's, a text at a time."""
    token = _background.set(True)
    try:
        yield
    finally:
        _background.reset(token)


class ModelThread:
    """`run` a batch on the thread; after `aclose` every call raises that `label`'s embedder is closed."""

    def __init__(self, label: str, thread_name: str) -> None:
        self._closed = f"This {label} embedder is closed."
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)
        # Chunks waiting for the thread; each executor task runs the first of them, the foreground's first.
        self._lock = threading.Lock()
        self._foreground: deque[_Item] = deque()
        self._background: deque[_Item] = deque()

    async def run(self, work: _Work, texts: list[str], dim: int) -> Vectors:
        """`work(texts)` on the thread, chunk by chunk (`chunks`), in order; no texts: an empty [0, dim]
        array, without a call."""
        import numpy as np  # here: building an embedder (config check) embeds nothing (decision 437)

        if not texts:
            if self._executor is None:
                raise EmbedderError(self._closed)
            return np.zeros((0, dim), dtype=np.float32)
        if _background.get():
            parts = await self._run_behind(work, chunks(texts, 0))
        else:  # each chunk queued once the one before is done: concurrent calls take turns
            parts = [await asyncio.wrap_future(self._queue(work, chunk, self._foreground)) for chunk in chunks(texts)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _run_behind(self, work: _Work, texts: list[list[str]]) -> list[Vectors]:
        """Background chunks all queued at once, so the thread goes from one to the next without waiting for
        the event loop (a loop slow under load left the thread idle between them, and the queue fell behind);
        a foreground chunk queued meanwhile still goes first. A cancel or failure drops those not begun."""
        futures = [self._queue(work, chunk, self._background) for chunk in texts]
        try:
            return [await asyncio.wrap_future(future) for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def _queue(self, work: _Work, texts: list[str], lane: deque[_Item]) -> Future[Vectors]:
        executor = self._executor
        if executor is None:
            raise EmbedderError(self._closed)
        future: Future[Vectors] = Future()
        item = (work, texts, future)
        with self._lock:
            lane.append(item)
        try:
            executor.submit(self._next)
        except RuntimeError as exc:  # shut down by a concurrent aclose()
            with self._lock:
                if item in lane:
                    lane.remove(item)
            raise EmbedderError(self._closed) from exc
        return future  # awaited through `wrap_future`: a cancel before it runs cancels it, and it is skipped

    def _next(self) -> None:
        """On the thread: the first chunk waiting, a foreground one before any background one."""
        with self._lock:
            lane = self._foreground or self._background
            if not lane:
                return
            work, texts, future = lane.popleft()
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = work(texts)
        except BaseException as exc:  # the caller meets it, as it met the executor's future's
            future.set_exception(exc)
        else:
            future.set_result(result)

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
