"""The bounded map of cached chats' int8 matrices both backends keep in memory (`vector_matrix.py`).

Why shared: SQLite and PostgreSQL both search a chat's vectors by scanning an int8 copy in klaw's
memory and rescoring a shortlist with the exact float vectors the database holds (decisions 145 and
221); they differ in how a copy is loaded and how it learns that the database changed, not in how the
copies are kept. What is kept here: the chats' matrices in least-recently-searched order, bounded by
`database.vectorCacheMb` (the oldest evicted first; a chat that alone outgrows the budget is not
kept; a small chat's float rows, `vector_matrix.py`, count too and are dropped before any chat is),
each with the version of the chat's vectors it reflects, changed under a lock the event loop only
ever tries (`cached_view`), so a search never waits for a load.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

    from klaw.store.shared.vector_matrix import ChatMatrix, MatrixView

VectorRow: TypeAlias = "tuple[int, int, int, npt.NDArray[np.float32]]"  # rowid, segment_id, created_at, vector


class ChatMatrixCache:
    def __init__(self, budget_bytes: int, search_threads: int = 2) -> None:
        self._budget = budget_bytes
        self.search_threads = max(1, search_threads)  # threads sharing one large scan
        self._chats: OrderedDict[int, ChatMatrix] = OrderedDict()
        self._lock = threading.RLock()  # every change of `_chats`, and `cached_view`'s read of it

    @property
    def budget_bytes(self) -> int:
        return self._budget

    @property
    def cached_bytes(self) -> int:
        with self._lock:
            return sum(matrix.nbytes for matrix in self._chats.values())

    def cached_view(self, chat_key: int, dim: int) -> MatrixView | None:
        """The chat's vectors as they are now if its copy is in memory (with `dim` columns), without
        reading the database or waiting for the lock: None sends the caller to the backend's load. A
        view taken just before a `forget` may name deleted rows; the exact rescore drops them."""
        found = self.cached(chat_key, dim)
        return None if found is None else found[0]

    def cached(self, chat_key: int, dim: int) -> tuple[MatrixView, int] | None:
        """`cached_view` with the version of the chat's vectors the view reflects."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            matrix = self._chats.get(chat_key)
            if matrix is None or matrix.dim != dim:
                return None
            self._chats.move_to_end(chat_key)
            return matrix.view(), matrix.version
        finally:
            self._lock.release()

    def keep(self, chat_key: int, matrix: ChatMatrix) -> bool:
        """Cache `matrix` as the chat's copy (replacing any), evicting the least recently searched
        chats to fit; False when it alone is larger than the budget (then it is not kept)."""
        with self._lock:
            self._chats[chat_key] = matrix
            self._chats.move_to_end(chat_key)
            self._evict(keep=chat_key)
            return chat_key in self._chats

    def added(self, chat_key: int, rows: Sequence[VectorRow], version: int, previous: int | None = None) -> None:
        """Vectors committed to the database: (rowid, segment_id, created_at, vector), and the chat's
        version after them. Only a chat already cached is updated; others load on their first search.
        `previous`: the version just before this insert, when other writers may change the chat too:
        a copy of another version missed someone's change and is dropped (the next search reloads it)."""
        with self._lock:
            matrix = self._chats.get(chat_key)
            if matrix is None:
                return
            if previous is not None and matrix.version != previous:
                del self._chats[chat_key]
                return
            if rows:
                matrix.append(rows)
            matrix.version = version
            self._evict(keep=chat_key)

    def invalidate(self, chat_key: int | None = None) -> None:
        """Forget one chat's copy (or all): the next search reloads it."""
        with self._lock:
            if chat_key is None:
                self._chats.clear()
            else:
                self._chats.pop(chat_key, None)

    def _evict(self, keep: int) -> None:
        self._shed_floats()
        while len(self._chats) > 1 and self.cached_bytes > self._budget:
            oldest = next(iter(self._chats))
            if oldest == keep:
                self._chats.move_to_end(oldest)
                oldest = next(iter(self._chats))
            del self._chats[oldest]
        matrix = self._chats.get(keep)
        if matrix is not None and matrix.nbytes > self._budget:
            del self._chats[keep]  # grew past the budget: the database's own search serves it from now on

    def _shed_floats(self) -> None:
        """Over the budget, small chats' float rows go first, least recently searched first: they never
        cost a chat its place (which chats are cached is what it was with int8 rows alone)."""
        total = self.cached_bytes
        for matrix in self._chats.values():
            if total <= self._budget:
                return
            if matrix.floats is not None:
                total -= matrix.nbytes
                matrix.drop_floats()
                total += matrix.nbytes
