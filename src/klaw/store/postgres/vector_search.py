"""Vector search on PostgreSQL through this engine's int8 copy of the chat (`vector_cache.py`).

The copy is scanned off the event loop (split over `vectorSearchThreads` when large) for a shortlist
of `shortlist(limit)` rows, as SQLite's search does (decision 145); one statement then reads the
chat's `vector_marks` version and rescores the shortlist with the exact float vectors of
`message_vectors` (`embedding <=> query`, the distance the server's own scan computes), joined to
their messages, in one snapshot. When that version is not the copy's, the copy missed a change
(another engine's vectors, a forget, a reindex): the answer is thrown away and the caller asks the
server's exact scan instead, so a stale copy is never what a search answers from. A shortlisted row
deleted since the copy was taken is simply not found by the rescore (decision 221).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import numpy.typing as npt

from klaw.store.postgres.connection import PostgresDatabase, Row, fetch_all
from klaw.store.postgres.vector_cache import VERSION_SQL, PostgresVectorCache
from klaw.store.postgres.vectors import MESSAGE_VECTORS
from klaw.store.shared.rows import MESSAGE_COLUMNS
from klaw.store.shared.vector_matrix import MatrixView, VectorScope, merge_nearest
from klaw.store.shared.vector_quant import shortlist


async def cached_nearest(
    db: PostgresDatabase,
    cache: PostgresVectorCache,
    located: tuple[MatrixView, int],
    chat_key: int,
    query: npt.NDArray[np.float32],
    limit: int,
    scope: VectorScope,
    where: tuple[str, list[Any]],
) -> list[Row] | None:
    """Rows of `MESSAGE_COLUMNS` and the distance, closest first, from the copy `located` (a view and
    its version); None when the copy is stale (the caller searches in the server)."""
    view, version = located
    count = shortlist(limit)
    parts = view.split(cache.search_threads)
    answers = await asyncio.gather(*(asyncio.to_thread(part.nearest, query, count, scope) for part in parts))
    candidates = [rowid for rowid, _ in merge_nearest(list(answers), count)]
    condition, params = where
    async with db.connection() as connection:
        rows = await fetch_all(
            connection,
            f"SELECT {MESSAGE_COLUMNS}, n.distance, k.version FROM (SELECT {VERSION_SQL} AS version) AS k"
            f" LEFT JOIN (SELECT v.rowid, v.embedding <=> %s AS distance FROM {MESSAGE_VECTORS} v"
            f" WHERE v.rowid = ANY(%s) AND {condition} ORDER BY distance, v.rowid LIMIT %s) AS n ON true"
            " LEFT JOIN messages m ON m.rowid = n.rowid ORDER BY n.distance, m.rowid",
            (chat_key, query, candidates, *params, limit),
        )
    seen = int(rows[0][-1]) if rows else 0
    if seen != version:
        cache.seen(chat_key, seen)
        return None
    return [row[:-1] for row in rows if row[0] is not None]
