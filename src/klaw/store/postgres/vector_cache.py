"""Per-chat int8 copies of `message_vectors` in this engine's memory, kept current across engines.

Why: an exact pgvector scan reads every vector of the chat in the server on every search (~100 ms at
100k, ~1.5 s at 1M here); the same int8 scan SQLite runs in klaw's memory (decision 145) reads a
quarter of the bytes with SIMD, and its shortlist is rescored with the exact float vectors in the
server, so the hits are exact search's (docs/decisions/221-postgres-int8-vector-copy.md).

What keeps a copy honest when several engines and CLI processes write the same database: each chat's
`vector_marks` version (migration 0008), changed by a trigger in every transaction that inserts or
deletes any of its vectors. A copy is loaded together with the version its rows are, in one snapshot;
each search reads the chat's version in the same statement as its rescore (`vector_search.py`) and
answers from the server's own scan when they differ, dropping the copy (the next search loads it
again). This engine's own inserts are appended to its copy when the version they replaced is the
copy's (`previous`): nobody else changed the chat in between. A forgotten message's vector is gone
from the server's table, so the rescore, which reads the shortlist's vectors there, never returns it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql

from klaw.store.postgres.connection import PostgresDatabase
from klaw.store.postgres.vector_copy import COPY_SQL, CopyFormatError, CopyReader
from klaw.store.shared.vector_lru import ChatMatrixCache
from klaw.store.shared.vector_matrix import ChatMatrix, MatrixView, row_bytes

log = logging.getLogger(__name__)

VERSION_SQL = "coalesce((SELECT version FROM vector_marks WHERE chat = %s), 0)"


class PostgresVectorCache(ChatMatrixCache):
    def __init__(self, budget_bytes: int, search_threads: int = 2) -> None:
        super().__init__(budget_bytes, search_threads)
        self._loads: dict[int, asyncio.Lock] = {}
        self._writes = 0  # this engine's vector inserts under way: a version seen meanwhile may be theirs

    async def view(self, db: PostgresDatabase, chat_key: int, dim: int) -> tuple[MatrixView, int] | None:
        """The chat's copy and its version, loaded from the server on first use; None when it does not
        fit the budget or could not be read (the server's own scan serves it then)."""
        found = self.cached(chat_key, dim)
        if found is not None or self.budget_bytes <= 0:
            return found
        lock = self._loads.setdefault(chat_key, asyncio.Lock())
        async with lock:  # one load per chat: a second search waits for it and uses it
            found = self.cached(chat_key, dim)
            if found is None:
                conninfo, options = db.pool.conninfo, db.pool.kwargs or {}
                if not isinstance(conninfo, str) or not isinstance(options, dict):
                    return None  # a pool made from a callable (not PostgresStore's): no copy
                matrix = await asyncio.to_thread(_read, conninfo, options, chat_key, dim, self.budget_bytes)
                if matrix is not None and self.keep(chat_key, matrix):
                    found = self.cached(chat_key, dim)
        return found

    def seen(self, chat_key: int, version: int) -> None:
        """A search read the chat's version on the server and it was not its copy's: drop the copy
        unless it has caught up meanwhile (this engine's insert committed and appended) or an insert of
        this engine is under way (its append will tell whether the copy is current)."""
        with self._lock:
            matrix = self._chats.get(chat_key)
            if matrix is not None and matrix.version != version and self._writes == 0:
                del self._chats[chat_key]

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Around this engine's vector insert, from before it starts until its rows are appended."""
        self._writes += 1
        try:
            yield
        finally:
            self._writes -= 1


def _read(conninfo: str, options: dict[str, Any], chat_key: int, dim: int, budget: int) -> ChatMatrix | None:
    """The chat's vectors and their version, read in one snapshot on a connection of its own, on a thread:
    psycopg's async COPY hands over one row per wake-up of the event loop (~40 µs each, 4 s for 100k
    rows), its blocking one a row per call. None when they do not fit `budget` or cannot be read."""
    try:
        with psycopg.connect(conninfo, **options) as connection, connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = connection.execute(
                f"SELECT count(*), {VERSION_SQL} FROM message_vectors WHERE chat = %s", (chat_key, chat_key)
            ).fetchone()
            count, version = (0, 0) if row is None else (int(row[0]), int(row[1]))
            if count * row_bytes(dim) > budget:
                return None
            reader = CopyReader(dim, version, count)
            with connection.cursor().copy(sql.SQL(COPY_SQL).format(chat=sql.Literal(chat_key))) as copy:
                for data in copy:
                    reader.feed(data)
            return reader.finish()
    except (psycopg.Error, CopyFormatError) as exc:
        # Not the layout expected (another dimension mid-rebind) or the server away: searched in the server.
        log.info("chat %s's vectors not copied into memory: %s", chat_key, type(exc).__name__)
        return None
