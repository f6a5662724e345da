"""Per-chat vector search in memory: each searched chat's message vectors as one int8 matrix.

Why: sqlite-vec's brute-force KNN runs without SIMD in the published wheels; over one chat of 100k
vectors it took ~70 ms. Auto-RAG runs on every turn, so the store keeps a read-through copy of each
searched chat's vectors and scans it with SIMD int8 products (`vector_quant.py`): a quarter of the
bytes float32 took (384 MB rather than 1.5 GB for 1M messages), and the shortlist it returns is
rescored with the exact float vectors by the search (`search.py`), so hits and distances are those
of exact float search. Decision: docs/decisions/145-int8-vector-search.md.

The matrix is kept by the database's single worker thread and searched on others (`MatrixView`,
`vector_matrix.py`): hybrid search scans it while the same worker runs the full-text query.

What it shares with PostgreSQL's copies (the bounded map of matrices, the lock) is
`shared/vector_lru.py`. `vec_messages` stays the source of truth: a chat's copy is filled on its first search (from the
copy saved beside the database when that is current, `vector_snapshot.py`, else from the table: in
bulk from its chunks, `vector_chunks.py`, or row by row),
appended to after each committed insert, and dropped by `invalidate` when vectors are deleted. A
chat whose vectors would not fit `budget_bytes` is never cached and is searched by sqlite-vec, so
memory stays bounded; least recently searched chats are evicted first. `ChatVectorCache` loads and
appends on the database's worker thread only; `cached_view` hands a cached chat's view to the event
loop without a round trip (decision 216), so the map of chats is changed and read under a lock that
the event loop never waits for.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import apsw

from klaw.store.shared.vector_lru import ChatMatrixCache
from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.sqlite.vector_snapshot import (
    SNAPSHOT_MIN_ROWS,
    SnapshotFolder,
    Stamp,
    agrees_with_table,
    current_stamp,
)
from klaw.store.sqlite.vector_tables import bound_embedder, table_exists

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    from klaw.store.shared.vector_matrix import ChatMatrix, MatrixView

log = logging.getLogger(__name__)

Row = tuple[int, int, int, bytes]


class ChatVectorCache(ChatMatrixCache):
    def __init__(
        self,
        budget_bytes: int,
        search_threads: int = 2,
        snapshots: SnapshotFolder | None = None,
        snapshot_min_rows: int = SNAPSHOT_MIN_ROWS,
    ) -> None:
        super().__init__(budget_bytes, search_threads)
        self._snapshots = snapshots  # where large chats' copies are saved (None: never saved)
        self._snapshot_min_rows = snapshot_min_rows

    def view(self, connection: apsw.Connection, table: str, chat_key: int, dim: int) -> MatrixView | None:
        """The chat's vectors as they are now (loaded on first use), or None when the chat is too
        large to cache."""
        matrix = self._chats.get(chat_key)
        if matrix is None:
            matrix = self._load(connection, table, chat_key, dim)
            if matrix is None:
                return None
        with self._lock:
            if chat_key in self._chats:
                self._chats.move_to_end(chat_key)
            return matrix.view()

    def warm(self, connection: apsw.Connection, table: str, dim: int) -> int:
        """Fill the cache: the most recently active chats first, each while its vectors fit beside
        what is cached (never evicting). Returns how many chats were loaded.

        Chats are chosen from one grouped count of `messages` (an upper bound of each chat's
        vectors); each chosen chat's current saved copy is read, and every other chosen chat's rows
        come from a single scan of the table."""
        from klaw.store.shared.vector_matrix import row_bytes

        if not table_exists(connection, table):
            return 0
        room = self._budget - self.cached_bytes
        chosen: list[int] = []
        counts = "SELECT chat, count(*) FROM messages GROUP BY chat ORDER BY max(created_at) DESC"
        for chat_key, messages in fetch_all(connection, counts):
            if chat_key in self._chats:
                continue
            size = int(messages) * row_bytes(dim)
            if size > room:
                break
            chosen.append(int(chat_key))
            room -= size
        unsaved = [key for key in chosen if not self._from_snapshot(connection, table, key)]
        if unsaved:
            self._from_table(connection, table, unsaved, dim)
        with self._lock:
            self._shed_floats()  # the chats were chosen by their int8 rows
        return len(chosen)

    def invalidate(self, chat_key: int | None = None) -> None:
        """Forget one chat's copy (or all), in memory and on disk: the next search reloads from the table."""
        super().invalidate(chat_key)
        if self._snapshots is not None:
            self._snapshots.remove(chat_key)

    def persist(self, connection: apsw.Connection, table: str) -> int:
        """Save the cached large chats whose saved copy is missing or older (at close). Returns how many."""
        if self._snapshots is None or not table_exists(connection, table):
            return 0
        saved = 0
        with self._lock:
            cached = list(self._chats.items())
        for chat_key, matrix in cached:
            if matrix.size < self._snapshot_min_rows or matrix.saved_version == matrix.version:
                continue
            stamp = current_stamp(connection, table, chat_key)
            if stamp is not None and stamp.version == matrix.version:
                self._snapshots.save(chat_key, stamp, matrix.arrays())
                matrix.saved_version = matrix.version
                saved += 1
        return saved

    def _load(self, connection: apsw.Connection, table: str, chat_key: int, dim: int) -> ChatMatrix | None:
        if _upper_bound_bytes(connection, chat_key, dim) > self._budget:
            return None
        if not self._from_snapshot(connection, table, chat_key):
            self._from_table(connection, table, [chat_key], dim)
        with self._lock:
            self._evict(keep=chat_key)
            return self._chats.get(chat_key)

    def _from_snapshot(self, connection: apsw.Connection, table: str, chat_key: int) -> bool:
        from klaw.store.shared.vector_matrix import ChatMatrix

        stamp = current_stamp(connection, table, chat_key) if self._snapshots is not None else None
        arrays = self._snapshots.load(chat_key, stamp) if self._snapshots is not None and stamp is not None else None
        if arrays is None or stamp is None:
            return False
        if not agrees_with_table(connection, table, arrays):
            log.warning("the saved vectors of chat %s are not the database's: loading them from it", chat_key)
            return False
        with self._lock:
            self._chats[chat_key] = ChatMatrix.from_arrays(arrays, stamp.version)
        return True

    def _from_table(self, connection: apsw.Connection, table: str, chat_keys: list[int], dim: int) -> None:
        started = time.perf_counter()
        for chat_key, (matrix, stamp) in table_copies(connection, table, chat_keys, dim).items():
            with self._lock:
                self._chats[chat_key] = matrix
            if self._snapshots is not None and stamp is not None and matrix.size >= self._snapshot_min_rows:
                self._snapshots.save(chat_key, stamp, matrix.arrays())
                matrix.saved_version = stamp.version
            if matrix.size >= self._snapshot_min_rows:  # what the first search of a large chat waited for
                log.info(
                    "loaded the %d vectors of chat %s from the database in %.1f s",
                    matrix.size,
                    chat_key,
                    time.perf_counter() - started,
                )


def table_copies(
    connection: apsw.Connection, table: str, chat_keys: list[int], dim: int
) -> dict[int, tuple[ChatMatrix, Stamp | None]]:
    """The chats' int8 copies read from the table: in bulk from vec0's chunks where that checks out
    (`vector_chunks.py`), row by row for the rest. Each carries the chat's version read before its
    vectors, so a write in between leaves a copy that knows it may be stale."""
    from klaw.store.shared.vector_matrix import ChatMatrix
    from klaw.store.sqlite.vector_chunks import read_chunked

    stamps = {key: current_stamp(connection, table, key) for key in chat_keys}
    matrices = read_chunked(connection, table, chat_keys, dim)
    rest = [key for key in chat_keys if key not in matrices]
    if rest:
        rows = _table_rows(connection, table, rest)
        matrices.update({key: ChatMatrix.from_rows(rows.get(key, []), dim, 0) for key in rest})
    for key, matrix in matrices.items():
        stamp = stamps[key]
        matrix.version = 0 if stamp is None else stamp.version
    return {key: (matrix, stamps[key]) for key, matrix in matrices.items()}


def save_large_chats(connection: apsw.Connection, table: str, folder: SnapshotFolder, min_rows: int) -> int:
    """Save the copy of every chat of at least `min_rows` vectors into `folder`, one chat in memory
    at a time: what `klaw reindex` leaves beside the database it builds, so the first start after
    it reads no large chat from the table. Returns how many were saved."""
    bound = bound_embedder(connection, table)
    if bound is None:
        return 0
    counted = "SELECT chat FROM messages GROUP BY chat HAVING count(*) >= ? ORDER BY chat"
    saved = 0
    for (chat_key,) in fetch_all(connection, counted, (min_rows,)):
        for key, (matrix, stamp) in table_copies(connection, table, [int(chat_key)], bound[1]).items():
            if stamp is not None and matrix.size >= min_rows:
                folder.save(key, stamp, matrix.arrays())
                saved += 1
    return saved


def _table_rows(connection: apsw.Connection, table: str, chat_keys: Sequence[int]) -> dict[int, list[Row]]:
    """(rowid, segment_id, created_at, embedding) of the chats' vectors, rowid order, in one pass.

    Segment and time come from `messages` (the same values, written from it): reading vec0's
    metadata columns doubled the time of a scan. A vector whose message is gone is left out."""
    keys = sorted(set(chat_keys))
    meta = {
        int(rowid): (int(chat), int(segment), int(created))
        for rowid, chat, segment, created in fetch_all(
            connection,
            "SELECT rowid, chat, segment_id, created_at FROM messages WHERE chat IN (SELECT value FROM json_each(?))",
            (json.dumps(keys),),
        )
    }
    scan = (
        f"SELECT rowid, embedding FROM {table} WHERE chat_key = ?"
        if len(keys) == 1
        else f"SELECT rowid, embedding FROM {table}"
    )
    rows: dict[int, list[Row]] = {key: [] for key in keys}
    for rowid, blob in connection.execute(scan, tuple(keys) if len(keys) == 1 else ()):
        found = meta.get(int(rowid))
        if found is not None and found[0] in rows:
            rows[found[0]].append((int(rowid), found[1], found[2], blob))
    for chat_rows in rows.values():
        chat_rows.sort()
    return rows


def _upper_bound_bytes(connection: apsw.Connection, chat_key: int, dim: int) -> int:
    # Messages bound the chat's vectors from above, and counting them is an index lookup
    # (counting inside vec0 scans it).
    from klaw.store.shared.vector_matrix import row_bytes

    messages = int(fetch_value(connection, "SELECT count(*) FROM messages WHERE chat = ?", (chat_key,)))
    return messages * row_bytes(dim)
