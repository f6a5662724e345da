"""`QueryMemo`: an embedder that remembers its last few single-text answers.

A turn's pending text is embedded by auto-RAG (hybrid search of the segment) and again by
past-conversation retrieval; with a local model that is ~10 ms each, with a remote one a round trip.
Both ask for the same single text within milliseconds, so the second is answered from memory.
Batches (the embedding queue's) pass straight through and are never kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from klaw.memory.embedder.protocol import Embedder, Vectors

DEFAULT_SIZE = 8


class QueryMemo:
    def __init__(self, inner: Embedder, size: int = DEFAULT_SIZE) -> None:
        self._inner = inner
        self._size = size
        self._kept: OrderedDict[str, Vectors] = OrderedDict()

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if len(texts) != 1:
            return await self._inner.embed(texts)
        text = texts[0]
        found = self._kept.get(text)
        if found is None:
            found = await self._inner.embed([text])
            self._kept[text] = found
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(text)
        return found.copy()

    async def aclose(self) -> None:
        """The inner embedder belongs to whoever made it (the engine closes it)."""
        return None
