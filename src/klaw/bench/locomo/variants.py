"""The three retrieval variants the bench compares, each through the product's own search code.

- `hybrid`: `HybridSearch.search` with the configuration's `search` section, the product default
  (vector KNN + FTS5 bm25, weighted score fusion, scores shared with neighbouring messages), asked
  for `top_k` candidates a side and cut to the `top_k` best.
- `fts`: the store's full-text search that `HybridSearch`'s text side calls (`store.search.full_text`,
  bm25 over each message and the message before it, conversation messages only): full text alone,
  without fusion or neighbours.
- `vector`: the store KNN that `HybridSearch`'s vector side calls (query embedded by the same
  embedder, `store.search.nearest`, closest first, conversation messages only). Unlike inside
  `HybridSearch`, an embedder failure is not degraded to full text here: it fails the run, so a
  broken vector side can never pass for a measured one.

`vector` and `fts` are thus each side on its own, as the hybrid search sees it before fusing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from klaw.config import SearchConfig
from klaw.memory.embedder.protocol import Embedder, embed_queries
from klaw.memory.hybrid_search import FTS_OVERFETCH, HybridSearch, is_conversation_message
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, StoredMessage

VARIANTS: Final = ("hybrid", "vector", "fts")

Retrieve = Callable[[ChatRef, str, int, int], Awaitable[list[StoredMessage]]]
"""(chat, question, segment id, top_k) → the retrieved messages, best first, at most top_k."""


def retriever(variant: str, store: Storage, embedder: Embedder, search: SearchConfig | None = None) -> Retrieve:
    if variant == "hybrid":
        return _hybrid(HybridSearch(store, embedder, search))
    if variant == "fts":
        return _full_text(store)
    if variant == "vector":
        return _vector(store, embedder)
    raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")


def _hybrid(search: HybridSearch) -> Retrieve:
    async def retrieve(chat: ChatRef, text: str, segment_id: int, top_k: int) -> list[StoredMessage]:
        hits = await search.search(chat, text, segment_id=segment_id, limit=top_k)
        return [hit.message for hit in hits[:top_k]]

    return retrieve


def _full_text(store: Storage) -> Retrieve:
    async def retrieve(chat: ChatRef, text: str, segment_id: int, top_k: int) -> list[StoredMessage]:
        # Twice as many as needed, as HybridSearch asks: tool records matched are dropped after.
        hits = await store.search.full_text(chat, text, limit=FTS_OVERFETCH * top_k, segment_id=segment_id)
        found: dict[int, StoredMessage] = {}
        for hit in hits:
            if is_conversation_message(hit.message):
                found.setdefault(hit.message.rowid, hit.message)
        return list(found.values())[:top_k]

    return retrieve


def _vector(store: Storage, embedder: Embedder) -> Retrieve:
    async def retrieve(chat: ChatRef, text: str, segment_id: int, top_k: int) -> list[StoredMessage]:
        vectors = await embed_queries(embedder, [text])
        hits = await store.search.nearest(chat, vectors[0], limit=top_k, segment_id=segment_id)
        ordered = sorted(hits, key=lambda hit: hit.score)  # closest first, whatever the backend's order
        return [hit.message for hit in ordered if is_conversation_message(hit.message)][:top_k]

    return retrieve
