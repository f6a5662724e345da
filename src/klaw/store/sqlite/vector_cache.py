"""Exact cosine search over a chat's message vectors, held in memory as one numpy matrix per chat.

Why: sqlite-vec's brute-force KNN runs without SIMD in the published wheels; over one chat of 100k
vectors it took ~70 ms where a numpy matrix product takes ~5 ms. Auto-RAG runs on every turn, so
the store keeps a read-through copy of each searched chat's vectors (float32, L2-normalised rows)
and answers KNN with one matrix product, exactly (no approximation, recall 1.0).

The cache itself is kept by the database's single worker thread, but the product runs on another
thread: `view` hands out a `MatrixView` (numpy views of the rows present at that moment), and rows a
view covers are never written again (appends go past them; growing copies into new arrays; a delete
drops the whole matrix). So hybrid search computes KNN while the same worker runs the full-text
query: at 100k messages that overlap is most of what keeps a search under 25 ms.

`vec_messages` stays the source of truth: the cache is filled from it on a chat's first search,
appended to after each committed insert, and dropped by `invalidate` when vectors are deleted. A
chat whose vectors would not fit `budget_bytes` is never cached and is searched by sqlite-vec, so
memory stays bounded; least recently searched chats are evicted first. `ChatVectorCache` is used
only on the database's worker thread, so it needs no locks; a `MatrixView` may be used anywhere. A
view taken before a delete may still name a deleted rowid: the caller's message lookup drops it.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw
import numpy as np
import numpy.typing as npt

from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.sqlite.vector_tables import table_exists

MIN_CAPACITY = 256
# A view at least this large is searched in parts on several threads (`MatrixView.split`): the
# product is memory-bound, and two threads read 100k rows in 6.9 ms where one takes 11.2 ms
# (x86_64, 2 cores). Below it a product takes ~2 ms and a thread hop would cost more than it saves.
SPLIT_MIN_ROWS = 20_000
# Below this share of a chat's rows, gathering the scoped rows beats a full product plus a mask.
GATHER_FRACTION = 0.25


@dataclass(frozen=True)
class VectorScope:
    segment_id: int | None = None
    since_ms: int | None = None
    until_ms: int | None = None


@dataclass(frozen=True)
class MatrixView:
    """The rows of a chat's matrix at one moment; safe to search on any thread (see module doc)."""

    vectors: npt.NDArray[np.float32]
    rowids: npt.NDArray[np.int64]
    segments: npt.NDArray[np.int64]
    created: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.rowids)

    def split(self, parts: int) -> list[MatrixView]:
        """Contiguous parts of about equal size (one part when the view is small), each searched on
        its own thread; `merge_nearest` combines their answers into the whole view's."""
        count = min(parts, len(self) // SPLIT_MIN_ROWS) if parts > 1 else 1
        if count <= 1:
            return [self]
        bounds = np.linspace(0, len(self), count + 1).astype(int)
        return [
            MatrixView(self.vectors[a:b], self.rowids[a:b], self.segments[a:b], self.created[a:b])
            for a, b in itertools.pairwise(bounds)
        ]

    def nearest(self, query: npt.NDArray[np.float32], limit: int, scope: VectorScope) -> list[tuple[int, float]]:
        """The `limit` nearest (rowid, cosine distance) within `scope`, closest first."""
        n = len(self.rowids)
        mask = np.ones(n, dtype=bool)
        if scope.segment_id is not None:
            mask &= self.segments == scope.segment_id
        if scope.since_ms is not None:
            mask &= self.created >= scope.since_ms
        if scope.until_ms is not None:
            mask &= self.created < scope.until_ms
        selected = np.flatnonzero(mask)
        if len(selected) == 0 or limit <= 0:
            return []
        if len(selected) < n * GATHER_FRACTION:
            similarities = self.vectors[selected] @ query
            candidates = selected
        else:
            similarities = self.vectors @ query
            if len(selected) < n:
                similarities[~mask] = -np.inf
            candidates = np.arange(n)
        k = min(limit, len(selected))
        top = np.argpartition(-similarities, k - 1)[:k] if k < len(similarities) else np.arange(len(similarities))
        top = top[np.argsort(-similarities[top], kind="stable")]
        return [(int(self.rowids[candidates[i]]), float(1.0 - similarities[i])) for i in top]


def merge_nearest(answers: list[list[tuple[int, float]]], limit: int) -> list[tuple[int, float]]:
    """The `limit` closest of several parts' answers (each the part's own closest): exactly the
    whole view's answer, since a row among the whole's closest is among its part's closest."""
    if len(answers) == 1:
        return answers[0][:limit]
    return sorted((pair for answer in answers for pair in answer), key=lambda pair: (pair[1], pair[0]))[:limit]


@dataclass
class _ChatMatrix:
    vectors: npt.NDArray[np.float32]
    rowids: npt.NDArray[np.int64]
    segments: npt.NDArray[np.int64]
    created: npt.NDArray[np.int64]
    size: int

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.rowids.nbytes + self.segments.nbytes + self.created.nbytes)

    def append(self, rows: list[tuple[int, int, int, npt.NDArray[np.float32]]]) -> None:
        needed = self.size + len(rows)
        if needed > len(self.rowids):
            self._grow(max(needed, 2 * len(self.rowids), MIN_CAPACITY))
        for offset, (rowid, segment_id, created_at, vector) in enumerate(rows):
            index = self.size + offset
            self.vectors[index] = vector
            self.rowids[index] = rowid
            self.segments[index] = segment_id
            self.created[index] = created_at
        self.size = needed

    def _grow(self, capacity: int) -> None:
        vectors = np.zeros((capacity, self.vectors.shape[1]), dtype=np.float32)
        vectors[: self.size] = self.vectors[: self.size]
        self.vectors = vectors
        self.rowids = _resized(self.rowids, capacity, self.size)
        self.segments = _resized(self.segments, capacity, self.size)
        self.created = _resized(self.created, capacity, self.size)

    def view(self) -> MatrixView:
        n = self.size
        return MatrixView(self.vectors[:n], self.rowids[:n], self.segments[:n], self.created[:n])


class ChatVectorCache:
    def __init__(self, budget_bytes: int, search_threads: int = 2) -> None:
        self._budget = budget_bytes
        self.search_threads = max(1, search_threads)  # threads sharing one large product
        self._chats: OrderedDict[int, _ChatMatrix] = OrderedDict()

    @property
    def cached_bytes(self) -> int:
        return sum(matrix.nbytes for matrix in self._chats.values())

    def view(self, connection: apsw.Connection, table: str, chat_key: int, dim: int) -> MatrixView | None:
        """The chat's vectors as they are now (loaded on first use), or None when the chat is too
        large to cache."""
        matrix = self._chats.get(chat_key)
        if matrix is None:
            matrix = self._load(connection, table, chat_key, dim)
            if matrix is None:
                return None
        if chat_key in self._chats:
            self._chats.move_to_end(chat_key)
        return matrix.view()

    def warm(self, connection: apsw.Connection, table: str, dim: int) -> int:
        """Fill the cache in one pass over `table`: the most recently active chats first, each while
        its vectors fit beside what is cached (never evicting). Returns how many chats were loaded.

        Chats are chosen from one grouped count of `messages` (an upper bound of each chat's
        vectors), then every chosen chat's rows come from a single scan of the table."""
        if not table_exists(connection, table):
            return 0
        room = self._budget - self.cached_bytes
        chosen: set[int] = set()
        counts = "SELECT chat, count(*) FROM messages GROUP BY chat ORDER BY max(created_at) DESC"
        for chat_key, messages in fetch_all(connection, counts):
            if chat_key in self._chats:
                continue
            size = int(messages) * (dim * 4 + 24)
            if size > room:
                break
            chosen.add(int(chat_key))
            room -= size
        if not chosen:
            return 0
        rows: dict[int, list[tuple[int, int, int, bytes]]] = {key: [] for key in chosen}
        for rowid, chat_key, segment_id, created_at, blob in connection.execute(
            f"SELECT rowid, chat_key, segment_id, created_at, embedding FROM {table}"
        ):
            kept = rows.get(chat_key)
            if kept is not None:
                kept.append((rowid, segment_id, created_at, blob))
        for chat_key, chat_rows in rows.items():
            self._chats[chat_key] = _matrix(chat_rows, dim)
        return len(rows)

    def added(self, chat_key: int, rows: list[tuple[int, int, int, npt.NDArray[np.float32]]]) -> None:
        """Vectors committed to the table: (rowid, segment_id, created_at, vector). Only a chat
        already cached is updated; others load everything on their first search."""
        matrix = self._chats.get(chat_key)
        if matrix is not None and rows:
            matrix.append(rows)
            self._evict(keep=chat_key)

    def invalidate(self, chat_key: int | None = None) -> None:
        """Forget one chat's copy (or all): the next search reloads from the table."""
        if chat_key is None:
            self._chats.clear()
        else:
            self._chats.pop(chat_key, None)

    def _load(self, connection: apsw.Connection, table: str, chat_key: int, dim: int) -> _ChatMatrix | None:
        if _upper_bound_bytes(connection, chat_key, dim) > self._budget:
            return None
        rows = fetch_all(
            connection,
            f"SELECT rowid, segment_id, created_at, embedding FROM {table} WHERE chat_key = ?",
            (chat_key,),
        )
        matrix = self._chats[chat_key] = _matrix(rows, dim)
        self._evict(keep=chat_key)
        return matrix

    def _evict(self, keep: int) -> None:
        while len(self._chats) > 1 and self.cached_bytes > self._budget:
            oldest = next(iter(self._chats))
            if oldest == keep:
                self._chats.move_to_end(oldest)
                oldest = next(iter(self._chats))
            del self._chats[oldest]
        matrix = self._chats.get(keep)
        if matrix is not None and matrix.nbytes > self._budget:
            del self._chats[keep]  # grew past the budget: sqlite-vec serves it from now on


def _matrix(rows: Sequence[Sequence[Any]], dim: int) -> _ChatMatrix:
    """A chat's matrix from its (rowid, segment_id, created_at, embedding blob) rows."""
    size = len(rows)
    capacity = max(size, 1)
    matrix = _ChatMatrix(
        vectors=np.zeros((capacity, dim), dtype=np.float32),
        rowids=np.zeros(capacity, dtype=np.int64),
        segments=np.zeros(capacity, dtype=np.int64),
        created=np.zeros(capacity, dtype=np.int64),
        size=size,
    )
    if size:
        matrix.vectors[:size] = np.frombuffer(b"".join(row[3] for row in rows), dtype=np.float32).reshape(size, dim)
        matrix.rowids[:size] = [row[0] for row in rows]
        matrix.segments[:size] = [row[1] for row in rows]
        matrix.created[:size] = [row[2] for row in rows]
    return matrix


def _upper_bound_bytes(connection: apsw.Connection, chat_key: int, dim: int) -> int:
    # Messages bound the chat's vectors from above, and counting them is an index lookup
    # (counting inside vec0 scans it).
    messages = int(fetch_value(connection, "SELECT count(*) FROM messages WHERE chat = ?", (chat_key,)))
    return messages * (dim * 4 + 24)


def _resized(array: npt.NDArray[np.int64], capacity: int, size: int) -> npt.NDArray[np.int64]:
    grown = np.zeros(capacity, dtype=np.int64)
    grown[:size] = array[:size]
    return grown
