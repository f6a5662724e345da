"""`EmbedOnce`: a text embedded once for both sides of search, when the embedder gives them the same vector.

A person's message is embedded twice on its way through the engine: as its turn's query (auto-RAG and
past conversations, through `QueryMemo`) and as a stored message, by the embedding queue. An embedder
without a query form of its own (MiniLM, OpenAI-compatible endpoints, the fake one: not a
`QueryEmbedder`) answers both with the same vector, so the second is wasted work: with MiniLM on this
project's 2-core reference machine, ~10-18 ms of CPU per message (docs/decisions/192-embedder-speed-floor.md).

`EmbedOnce` sits between that embedder and its two users (the queue and the turns' `QueryMemo`): a text
whose vector it holds (the last `KEPT_VECTORS` texts, keyed by a digest so a pasted document is not kept
whole) or is computing is not sent to the model again; the second asker takes the kept vector or waits
for the computation in flight. `prepare` starts a message's vector as soon as the message is accepted,
so it runs while the log is fsync'd and the exchange opened, and both users find it.

An embedder with a query form (e5's "query: " and "passage: ") is not wrapped (`embed_once`): its two
vectors of a text differ, and each is computed as before.
(docs/decisions/202-embed-once.md)
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from klaw.cancellation import cancel_and_wait
from klaw.memory.embedder.protocol import Embedder, EmbedderError, QueryEmbedder, Vectors, WrappedEmbedder

KEPT_VECTORS = 256  # ~85 turns of messages, replies, summaries: a queue behind busy turns (decision 508); ~400 KB

if TYPE_CHECKING:  # numpy is imported where rows are stacked: importing the engine loads none (520)
    import numpy as np
    import numpy.typing as npt

_Vector: TypeAlias = "npt.NDArray[np.float32]"
_Source: TypeAlias = "_Vector | tuple[asyncio.Task[Vectors], int]"  # a kept row, or a computation and the row it gives


def embeds_alike(embedder: Embedder) -> bool:
    """Whether `embedder` gives a search query the vector it gives a stored text (no query form)."""
    return not isinstance(embedder, QueryEmbedder)


def embed_once(embedder: Embedder) -> Embedder:
    """`embedder` behind an `EmbedOnce` when its two forms are the same, else `embedder` itself."""
    return EmbedOnce(embedder) if embeds_alike(embedder) else embedder


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbedOnce(WrappedEmbedder):
    """An embedder (query form = stored form) whose recent and in-flight texts are not embedded again.

    The inner embedder belongs to whoever made it: `aclose` only cancels what this one started."""

    def __init__(self, inner: Embedder, size: int = KEPT_VECTORS) -> None:
        super().__init__(inner)
        self._size = size
        self._kept: OrderedDict[bytes, _Vector] = OrderedDict()
        self._computing: dict[bytes, tuple[asyncio.Task[Vectors], int]] = {}
        self.computed = 0  # texts sent to the inner embedder, for tests and benches

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return await self._inner.embed(texts)
        keys = [_key(text) for text in texts]
        new = {key: text for key, text in zip(keys, texts, strict=True) if self._source(key) is None}
        if new:
            self._start(list(new.values()), list(new))
        # Every source is taken before the first await: a computation that settles meanwhile moves its
        # rows from `_computing` to `_kept`, and the task taken here still answers.
        sources = [self._source(key) for key in keys]
        rows = []
        for source in sources:
            assert source is not None
            if isinstance(source, tuple):
                task, index = source
                rows.append((await asyncio.shield(task))[index])
            else:
                rows.append(source)
        import numpy as np

        return np.stack(rows).astype(np.float32, copy=False)

    def kept(self, text: str) -> Vectors | None:
        """`text`'s vector as a one-row matrix when it is computed and kept, else None (not yet asked,
        or still being computed): a turn's query whose vector its message's `prepare` already made
        takes it at once, without waiting a turn of the event loop for a task (decision 405)."""
        row = self._kept.get(_key(text))
        if row is None:
            return None
        self._kept.move_to_end(_key(text))
        return row.reshape(1, -1).copy()

    def prepare(self, text: str) -> None:
        """Start computing `text`'s vector in the background (kept for whoever asks next), unless it
        is kept or being computed already; a failure is left for the next asker to meet again."""
        key = _key(text)
        if self._source(key) is None:
            self._start([text], [key])

    def _source(self, key: bytes) -> _Source | None:
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        return self._computing.get(key)

    def _start(self, texts: list[str], keys: list[bytes]) -> None:
        task = asyncio.create_task(self._compute(texts), name="embedding")
        for index, key in enumerate(keys):
            self._computing[key] = (task, index)
        self.computed += len(texts)
        task.add_done_callback(lambda done: self._settle(keys, done))

    async def _compute(self, texts: list[str]) -> Vectors:
        vectors = await self._inner.embed(texts)
        if vectors.shape[0] != len(texts):
            raise EmbedderError(f"the embedder returned {vectors.shape[0]} vectors for {len(texts)} texts")
        return vectors

    def _settle(self, keys: list[bytes], task: asyncio.Task[Vectors]) -> None:
        for key in keys:
            if self._computing.get(key, (None, 0))[0] is task:
                del self._computing[key]
        if task.cancelled() or task.exception() is not None:
            return  # each waiter met the failure; the next ask computes again
        vectors = task.result()
        for index, key in enumerate(keys):
            self._kept[key] = vectors[index].copy()  # a row alone, not the whole batch kept alive
            self._kept.move_to_end(key)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)

    async def aclose(self) -> None:
        """Cancel computations still running (a prepared vector nobody waits for any more)."""
        await cancel_and_wait(*{task for task, _ in self._computing.values()})  # decision 428
