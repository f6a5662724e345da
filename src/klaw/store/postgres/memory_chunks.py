"""Archival memory in PostgreSQL: `memory_chunks` (written only by the `memory_saved` fold), its
generated tsvector and its vectors (`memory_vectors`, exact KNN per chat: a chat saves hundreds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from klaw.store.archival_records import MemoryChunk, MemoryHit
from klaw.store.postgres.bm25 import RANK_WEIGHTS
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_all, fetch_one, fetch_value
from klaw.store.postgres.search import word_query
from klaw.store.postgres.vector_puts import PutPart, nothing_after, run_puts
from klaw.store.postgres.vectors import MEMORY_VECTORS, bind_table, checked, query_vector
from klaw.store.records import MEMORY_TARGET, ChatRef
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.shared.rows import CHUNK_COLUMNS, CHUNK_FROM, chunk_from_row
from klaw.store.shared.vector_binding import bound
from klaw.store.sqlite.fts_query import search_words


class PostgresMemoryChunks:
    def __init__(self, db: PostgresDatabase, chats: ChatKeys, paid: PaidJobs) -> None:
        self._paid = paid  # the put pays the chunks' embedding jobs (decision 229)
        self._db = db
        self._chats = chats
        self._dim: int | None = None

    async def bind_embedder(self, embedder_id: str, dim: int) -> None:
        async with self._db.transaction() as connection:
            await bind_table(connection, MEMORY_VECTORS, embedder_id, dim)
        self._dim = dim

    @property
    def bound(self) -> bool:
        return self._dim is not None

    async def get(self, rowid: int) -> MemoryChunk | None:
        async with self._db.connection() as connection:
            row = await fetch_one(connection, f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.rowid = %s", (rowid,))
        return None if row is None else chunk_from_row(row)

    async def with_id(self, prefix: str, chat: ChatRef | None, *, limit: int) -> list[MemoryChunk]:
        wanted = prefix.lower().replace("\x00", "")  # a NUL cannot reach PostgreSQL's text
        matches = f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE starts_with(lower(m.id), %s)"
        if chat is None:
            async with self._db.connection() as connection:
                rows = await fetch_all(connection, f"{matches} ORDER BY c.rowid LIMIT %s", (wanted, limit))
        else:
            sql = f"{matches} AND c.chat = %s ORDER BY c.rowid LIMIT %s"
            rows = await self._chats.rows(self._db, chat, sql, lambda key: (wanted, key, limit))
        return [chunk_from_row(row) for row in rows]

    async def find(self, chat: ChatRef, content: str) -> MemoryChunk | None:
        sql = f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.chat = %s AND c.content = %s ORDER BY c.rowid LIMIT 1"
        found = await self._chats.rows(self._db, chat, sql, lambda key: (key, content.replace("\x00", "\ufffd")))
        return chunk_from_row(found[0]) if found else None

    async def latest(self, chat: ChatRef, limit: int) -> list[MemoryChunk]:
        sql = f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.chat = %s ORDER BY c.rowid DESC LIMIT %s"
        return [chunk_from_row(row) for row in await self._chats.rows(self._db, chat, sql, lambda key: (key, limit))]

    async def texts(self, rowids: Sequence[int]) -> dict[int, str]:
        if not rowids:
            return {}
        async with self._db.connection() as connection:
            rows = await fetch_all(
                connection, "SELECT rowid, content FROM memory_chunks WHERE rowid = ANY(%s)", (list(rowids),)
            )
        return {int(row[0]): str(row[1]) for row in rows}

    async def count(self, chat: ChatRef | None = None) -> int:
        if chat is None:
            async with self._db.connection() as connection:
                return int(await fetch_value(connection, "SELECT count(*) FROM memory_chunks"))
        sql = "SELECT count(*) FROM memory_chunks WHERE chat = %s"
        return int(await self._chats.value(self._db, chat, sql, lambda key: (key,)) or 0)

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        if not vectors:
            return 0
        return (await run_puts(self._db, self._paid, [self.put_part(vectors)]))[0]

    def put_part(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> PutPart:
        """`put` as one part of a transaction storing several targets' vectors (vector_puts.py)."""
        rows = checked(vectors, bound(self._dim, "memory"), "memory")

        async def insert(connection: Connection) -> tuple[int, Callable[[], None]]:
            added = 0
            for rowid, vector in rows:
                added += await execute(
                    connection,
                    f"INSERT INTO {MEMORY_VECTORS} (rowid, chat, created_at, embedding)"
                    " SELECT c.rowid, c.chat, c.created_at, %s FROM memory_chunks c WHERE c.rowid = %s"
                    " ON CONFLICT (rowid) DO NOTHING",
                    (vector, rowid),
                )
            return added, nothing_after

        return PutPart(MEMORY_TARGET, [rowid for rowid, _ in rows], insert)

    async def vector_count(self) -> int:
        async with self._db.connection() as connection:
            return int(await fetch_value(connection, f"SELECT count(*) FROM {MEMORY_VECTORS}"))

    async def full_text(self, chat: ChatRef, text: str, *, limit: int) -> list[MemoryHit]:
        """The chat's memories matching `text`, best first (score: the negated ts_rank_cd)."""
        words = search_words(text)
        if not words or limit <= 0:
            return []
        query = " || ".join(word_query(w) for w in words)
        sql = (
            f"SELECT {CHUNK_COLUMNS}, -ts_rank_cd('{RANK_WEIGHTS}', c.search, q.query) AS score"
            f" FROM {CHUNK_FROM}, (SELECT {query} AS query) AS q"
            " WHERE c.search @@ q.query AND c.chat = %s ORDER BY score, c.rowid LIMIT %s"
        )
        rows = await self._chats.rows(self._db, chat, sql, lambda key: (*words, key, limit))
        return [MemoryHit(chunk_from_row(row), float(row[7])) for row in rows]

    async def nearest(self, chat: ChatRef, vector: npt.NDArray[np.float32], *, limit: int) -> list[MemoryHit]:
        if limit <= 0:
            return []
        sql = (
            f"SELECT {CHUNK_COLUMNS}, n.distance FROM (SELECT v.rowid, v.embedding <=> %s AS distance"
            f" FROM {MEMORY_VECTORS} v WHERE v.chat = %s ORDER BY distance, v.rowid LIMIT %s) AS n"
            " JOIN memory_chunks c ON c.rowid = n.rowid JOIN messages m ON m.rowid = c.rowid"
            " ORDER BY n.distance, c.rowid"
        )
        rows = await self._chats.rows(self._db, chat, sql, lambda key: (query_vector(vector), key, limit))
        return [MemoryHit(chunk_from_row(row), float(row[7])) for row in rows]
