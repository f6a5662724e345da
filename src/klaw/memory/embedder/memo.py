"""`QueryMemo`: an embedder that remembers its last few single-text answers, and bounds the wait for them.

A turn's pending text is embedded by auto-RAG (hybrid search of the segment) and again by
past-conversation retrieval; with a local model that is ~10 ms each, with a remote one a round trip.
Both ask for the same single text within milliseconds, so the second is answered from memory (or
waits on the same request). Batches (the embedding queue's) pass straight through and are never kept.
It is the query side of search: a single text is embedded in the inner embedder's query form
(`protocol.embed_queries`, e5's "query: "), whether asked by `embed` or `embed_queries`.

A turn waits at most `deadline_seconds` for its text's vector, counted from the first request for
it: a remote embedder that hangs would otherwise hold up every turn for its whole HTTP timeout
(60 s by default). Past the deadline `embed` raises `EmbedderError`, which recall treats as a
failed vector side (full-text search alone); the request itself goes on in the background and its
answer is kept for the next ask. A local model's one-time load (`warm_up.py`) is not counted: a text
asked while it is under way waits for it first, then has its whole deadline.
(docs/decisions/041-query-embedding-deadline.md, 260-embedder-warm-up.md)
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence

from klaw.cancellation import cancel_and_wait
from klaw.memory.embedder.protocol import Embedder, EmbedderError, Vectors, WrappedEmbedder, embed_queries
from klaw.memory.embedder.warm_up import WarmUp

DEFAULT_SIZE = 8
DEFAULT_DEADLINE_SECONDS = 2.0


class QueryMemo(WrappedEmbedder):
    def __init__(
        self,
        inner: Embedder,
        size: int = DEFAULT_SIZE,
        deadline_seconds: float | None = None,
        warm_up: WarmUp | None = None,
    ) -> None:
        super().__init__(inner)
        self._warm_up = warm_up
        self._size = size
        self._deadline = deadline_seconds
        self._kept: OrderedDict[str, Vectors] = OrderedDict()
        self._asked: dict[str, tuple[asyncio.Task[Vectors], float]] = {}  # in flight: request, due (loop time)

    async def embed_queries(self, texts: Sequence[str]) -> Vectors:
        if len(texts) != 1:
            return await embed_queries(self._inner, texts)
        return await self.embed(texts)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if len(texts) != 1:
            return await self._inner.embed(texts)
        text = texts[0]
        found = self._kept.get(text)
        if found is None:
            found = self._made(text)
        if found is not None:
            self._kept.move_to_end(text)
            return found.copy()
        if self._warm_up is not None and not self._warm_up.done:
            await self._warm_up.wait()  # the model's load, paid once, is not this query's to time
        task, due = self._asked.get(text) or self._ask(text)
        try:
            if self._deadline is None:
                return (await asyncio.shield(task)).copy()
            async with asyncio.timeout_at(due):
                return (await asyncio.shield(task)).copy()
        except TimeoutError:
            raise EmbedderError(f"the query embedding took longer than {self._deadline:g} s") from None

    def _made(self, text: str) -> Vectors | None:
        """The vector the inner embedder already holds for `text` (`EmbedOnce.kept`: a turn's message,
        prepared as it was accepted), kept here too; None when it has none. Asking for it through a
        task, as a request is asked, costs the answer two turns of the event loop, each behind whatever
        else is ready to run (other chats, the background work): p95 ~4.5 ms a turn in
        `klaw bench turn` (decision 405)."""
        kept = getattr(self._inner, "kept", None)
        found: Vectors | None = kept(text) if callable(kept) else None
        if found is not None:
            self._kept[text] = found
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return found

    def _ask(self, text: str) -> tuple[asyncio.Task[Vectors], float]:
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(embed_queries(self._inner, [text]), name="query-embedding")
        entry = self._asked[text] = (task, loop.time() + (self._deadline or 0.0))
        task.add_done_callback(lambda done: self._settle(text, done))
        return entry

    def _settle(self, text: str, task: asyncio.Task[Vectors]) -> None:
        self._asked.pop(text, None)
        if task.cancelled() or task.exception() is not None:
            return  # each caller saw the failure; the next turn asks again
        self._kept[text] = task.result()
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)

    async def aclose(self) -> None:
        """Cancel requests still in flight; the inner embedder belongs to whoever made it (the engine closes it)."""
        await cancel_and_wait(*(task for task, _ in list(self._asked.values())))  # decision 428
