"""Per-chat int8 copies of `message_vectors` in this engine's memory, kept current across engines.

Why: an exact pgvector scan reads every vector of the chat in the server on every search (~100 ms at
100k, ~1.5 s at 1M here); the same int8 scan SQLite runs in klaw's memory (decision 145) reads a
quarter of the bytes with SIMD, and its shortlist is rescored with the exact float vectors in the
server, so the hits are exact search's (docs/decisions/221-postgres-int8-vector-copy.md).

What keeps a copy honest when several engines and CLI processes write the same database: each chat's
`vector_marks` version (migration 0008), changed by a trigger in every transaction that inserts or
deletes any of its vectors. A copy is loaded together with the version its rows are, in one snapshot;
each search reads the chat's version in the same statement as its rescore (`vector_search.py`) and
answers from the server's own scan when they differ; the next search first brings the copy up to date:
only the vectors it lacks when nothing was deleted since it was read (`vector_marks.deleted`, migration
0009), else every vector again. This engine's own inserts are appended to its copy when the version they replaced is the
copy's (`previous`): nobody else changed the chat in between. A forgotten message's vector is gone
from the server's table, so the rescore, which reads the shortlist's vectors there, never returns it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from klaw.store.postgres.connection import PostgresDatabase
from klaw.store.postgres.vector_copy import COPY_SQL, CopyFormatError, CopyReader
from klaw.store.shared.vector_lru import ChatMatrixCache
from klaw.store.shared.vector_matrix import ChatMatrix, MatrixView, row_bytes

log = logging.getLogger(__name__)

VERSION_SQL = "coalesce((SELECT version FROM vector_marks WHERE chat = %s), 0)"


@dataclass(frozen=True)
class _Read:
    matrix: ChatMatrix  # every vector of the chat (`full`), or only those its copy lacked
    full: bool
    deleted: int  # the chat's `vector_marks.deleted` in the snapshot read (migration 0009)


class PostgresVectorCache(ChatMatrixCache):
    def __init__(self, budget_bytes: int, search_threads: int = 2) -> None:
        super().__init__(budget_bytes, search_threads)
        self._loads: dict[int, asyncio.Lock] = {}
        self._behind: set[int] = set()  # chats whose copy a search found older than the server's vectors
        self._deleted: dict[int, int] = {}  # per chat, the last deletion its copy has seen
        self._writes = 0  # this engine's vector inserts under way: a version seen meanwhile may be theirs
        self.loads = 0  # whole copies read from the server (a catch-up is not one)

    async def view(self, db: PostgresDatabase, chat_key: int, dim: int) -> tuple[MatrixView, int] | None:
        """The chat's copy and its version: loaded from the server on first use, brought up to date
        first when a search found it behind; None when it does not fit the budget or could not be read
        (the server's own scan serves it then)."""
        found = self.cached(chat_key, dim)
        if (found is not None and chat_key not in self._behind) or self.budget_bytes <= 0:
            return found
        conninfo, options = db.pool.conninfo, db.pool.kwargs or {}
        if not isinstance(conninfo, str) or not isinstance(options, dict):
            return None  # a pool made from a callable (not PostgresStore's): no copy
        lock = self._loads.setdefault(chat_key, asyncio.Lock())
        async with lock:  # one load per chat: a second search waits for it and uses it
            found = self.cached(chat_key, dim)
            if found is not None and chat_key not in self._behind:
                return found
            self._behind.discard(chat_key)
            known = None if found is None else (found[0].rowids, self._deleted.get(chat_key, -1))
            read = await asyncio.to_thread(_read, conninfo, options, chat_key, dim, self.budget_bytes, known)
            if read is None:
                self.invalidate(chat_key)
            elif read.full:
                self.loads += 1
                self._deleted[chat_key] = read.deleted
                self.keep(chat_key, read.matrix)
            elif found is not None:
                self._extend(chat_key, found, read.matrix)
            found = self.cached(chat_key, dim)
        return found

    def seen(self, chat_key: int, version: int) -> None:
        """A search read the chat's version on the server and it was not its copy's: the next search
        brings the copy up to date first, unless it caught up meanwhile (this engine's insert committed
        and appended) or an insert of this engine is under way (its append will tell)."""
        with self._lock:
            matrix = self._chats.get(chat_key)
            if matrix is not None and matrix.version != version and self._writes == 0:
                self._behind.add(chat_key)

    def _extend(self, chat_key: int, was: tuple[MatrixView, int], rows: ChatMatrix) -> None:
        """Append the vectors the copy lacked, if the copy is still the one they were read against."""
        view, version = was
        with self._lock:
            matrix = self._chats.get(chat_key)
            if matrix is None or matrix.version != version or matrix.size != len(view):
                self._chats.pop(chat_key, None)  # changed meanwhile: the next search loads it whole
                return
            if rows.size:
                new = rows.arrays()
                meta = zip(new["rowids"].tolist(), new["segments"].tolist(), new["created"].tolist(), strict=True)
                matrix.append_quantized(meta, new["codes"], new["scales"])  # type: ignore[arg-type]
            matrix.version = rows.version
            self._evict(keep=chat_key)

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Around this engine's vector insert, from before it starts until its rows are appended."""
        self._writes += 1
        try:
            yield
        finally:
            self._writes -= 1


def _read(
    conninfo: str,
    options: dict[str, Any],
    chat_key: int,
    dim: int,
    budget: int,
    known: tuple[npt.NDArray[np.int64], int] | None = None,
) -> _Read | None:
    """The chat's vectors and their version, read in one snapshot on a connection of its own, on a thread:
    psycopg's async COPY hands over one row per wake-up of the event loop (~40 µs each, 4 s for 100k
    rows), its blocking one a row per call. With `known` (the rowids of a copy found behind, and the last
    deletion it saw), only the vectors missing from it when nothing was deleted since (else all of them).
    None when they do not fit `budget` or cannot be read."""
    try:
        with psycopg.connect(conninfo, **options) as connection, connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = connection.execute(
                f"SELECT count(*), {VERSION_SQL}, coalesce((SELECT deleted FROM vector_marks WHERE chat = %s), 0)"
                " FROM message_vectors WHERE chat = %s",
                (chat_key, chat_key, chat_key),
            ).fetchone()
            count, version, deleted = (0, 0, 0) if row is None else (int(row[0]), int(row[1]), int(row[2]))
            if count * row_bytes(dim) > budget:
                return None
            only: sql.Composable = sql.SQL("")
            if known is not None and known[1] == deleted:
                held = connection.execute("SELECT rowid FROM message_vectors WHERE chat = %s", (chat_key,)).fetchall()
                server = np.fromiter((r[0] for r in held), dtype=np.int64, count=len(held))
                if np.isin(known[0], server).all():
                    missing = np.setdiff1d(server, known[0])
                    only = (
                        sql.SQL(" AND rowid = ANY({})").format(sql.Literal(missing.tolist()))
                        if len(missing)
                        else sql.SQL(" AND false")
                    )
                    count = len(missing)
                else:
                    known = None  # some of the copy is gone from the server: read every vector again
            else:
                known = None  # vectors were taken away since the copy was read: read every one again
            reader = CopyReader(dim, version, count)
            statement = sql.SQL(COPY_SQL).format(chat=sql.Literal(chat_key), only=only)
            with connection.cursor().copy(statement) as copy:
                for data in copy:
                    reader.feed(data)
            return _Read(reader.finish(), full=known is None, deleted=deleted)
    except (psycopg.Error, CopyFormatError) as exc:
        # Not the layout expected (another dimension mid-rebind) or the server away: searched in the server.
        log.info("chat %s's vectors not copied into memory: %s", chat_key, type(exc).__name__)
        return None
