"""Archival memory in SQLite: `memory_chunks`, its FTS5 index and its vectors (`vec_memory`).

Chunks are written only by the `memory_saved` fold (`archival_fold.py`), so the log stays the source
of truth; this repository reads and searches them and stores their vectors. A chat saves a few
hundred memories, not hundreds of thousands of messages, so KNN is sqlite-vec's own (partitioned by
chat) without the in-memory cache messages need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import apsw

from klaw.config import FullTextTokenizer
from klaw.store.archival_records import MemoryChunk, MemoryHit
from klaw.store.records import MEMORY_TARGET, ChatRef
from klaw.store.shared.rows import CHUNK_COLUMNS, CHUNK_FROM, chunk_from_row
from klaw.store.shared.vector_binding import bound
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.fts_query import fts5_match_expression
from klaw.store.sqlite.job_ledger import JobLedger
from klaw.store.sqlite.query import fetch_all, fetch_one, fetch_value
from klaw.store.sqlite.vector_puts import PutPart, nothing_after, put_one
from klaw.store.sqlite.vector_tables import bind_vector_table, table_exists, vector_blobs, vector_count

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

MEMORY_VECTORS = "vec_memory"
_VEC_COLUMNS = "chat_key integer partition key, embedding float[{dim}] distance_metric=cosine, created_at integer"


class SqliteMemoryChunks:
    def __init__(
        self, db: SqliteDatabase, chats: ChatKeys, ledger: JobLedger, tokenizer: FullTextTokenizer = "porter"
    ) -> None:
        self._db = db
        self._ledger = ledger  # the put pays the chunks' embedding jobs (job_ledger.py)
        self._tokenizer = tokenizer
        self._chats = chats
        self._dim: int | None = None

    async def bind_embedder(self, embedder_id: str, dim: int) -> None:
        """Record the embedder for `vec_memory`, creating it on first use; `IndexMismatchError` if
        vectors of another embedder or size are stored."""
        await self._db.run(
            lambda connection: bind_vector_table(connection, MEMORY_VECTORS, _VEC_COLUMNS, embedder_id, dim)
        )
        self._dim = dim

    @property
    def bound(self) -> bool:
        return self._dim is not None

    async def get(self, rowid: int) -> MemoryChunk | None:
        def query(connection: apsw.Connection) -> MemoryChunk | None:
            row = fetch_one(connection, f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.rowid = ?", (rowid,))
            return None if row is None else chunk_from_row(row)

        return await self._db.run(query)

    async def with_id(self, prefix: str, chat: ChatRef | None, *, limit: int) -> list[MemoryChunk]:
        def query(connection: apsw.Connection) -> list[MemoryChunk]:
            where, values = "lower(substr(m.id, 1, ?)) = ?", [len(prefix), prefix.lower()]
            if chat is not None:
                chat_key = self._chats.find(connection, chat)
                if chat_key is None:
                    return []
                where, values = f"c.chat = ? AND {where}", [chat_key, *values]
            sql = f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE {where} ORDER BY c.rowid LIMIT ?"
            return [chunk_from_row(row) for row in connection.execute(sql, (*values, limit))]

        return await self._db.run(query)

    async def find(self, chat: ChatRef, content: str) -> MemoryChunk | None:
        """The chat's memory with exactly this text, if any (saving it again adds nothing)."""

        def query(connection: apsw.Connection) -> MemoryChunk | None:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return None
            row = fetch_one(
                connection,
                f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.chat = ? AND c.content = ? ORDER BY c.rowid LIMIT 1",
                (chat_key, content),
            )
            return None if row is None else chunk_from_row(row)

        return await self._db.run(query)

    async def texts(self, rowids: Sequence[int]) -> dict[int, str]:
        """The texts of the chunks that still exist (the embedding queue's source)."""
        wanted = list(rowids)
        if not wanted:
            return {}

        def query(connection: apsw.Connection) -> dict[int, str]:
            marks = ",".join("?" * len(wanted))
            rows = fetch_all(connection, f"SELECT rowid, content FROM memory_chunks WHERE rowid IN ({marks})", wanted)
            return {int(row[0]): str(row[1]) for row in rows}

        return await self._db.run(query)

    async def latest(self, chat: ChatRef, limit: int) -> list[MemoryChunk]:
        def query(connection: apsw.Connection) -> list[MemoryChunk]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            sql = f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.chat = ? ORDER BY c.rowid DESC LIMIT ?"
            return [chunk_from_row(row) for row in connection.execute(sql, (chat_key, limit))]

        return await self._db.run(query)

    async def count(self, chat: ChatRef | None = None) -> int:
        def query(connection: apsw.Connection) -> int:
            if chat is None:
                return int(fetch_value(connection, "SELECT count(*) FROM memory_chunks"))
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return 0
            return int(fetch_value(connection, "SELECT count(*) FROM memory_chunks WHERE chat = ?", (chat_key,)))

        return await self._db.run(query)

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        """Store chunk vectors by rowid (existing ones kept, vanished chunks skipped); returns how many
        were new."""
        return 0 if not vectors else await put_one(self._db, self._ledger, self.put_part(vectors))

    def put_part(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> PutPart:
        """`put` as one part of a transaction storing several targets' vectors (vector_puts.py)."""
        blobs = vector_blobs(vectors, bound(self._dim, "memory"), "memory")

        def insert(connection: apsw.Connection) -> tuple[int, Callable[[], None]]:
            added = 0
            for rowid, blob in blobs:
                if fetch_one(connection, f"SELECT 1 FROM {MEMORY_VECTORS} WHERE rowid = ?", (rowid,)):
                    continue
                meta = fetch_one(connection, "SELECT chat, created_at FROM memory_chunks WHERE rowid = ?", (rowid,))
                if meta is None:
                    continue  # forgotten while it was being embedded
                connection.execute(
                    f"INSERT INTO {MEMORY_VECTORS} (rowid, chat_key, embedding, created_at) VALUES (?, ?, ?, ?)",
                    (rowid, meta[0], blob, meta[1]),
                )
                added += 1
            return added, nothing_after

        return PutPart(MEMORY_TARGET, [rowid for rowid, _ in blobs], insert)

    async def vector_count(self) -> int:
        return await self._db.run(lambda connection: vector_count(connection, MEMORY_VECTORS))

    async def full_text(self, chat: ChatRef, text: str, *, limit: int) -> list[MemoryHit]:
        """The chat's memories matching `text` by FTS5 bm25 (lower is better), best first."""
        expression = fts5_match_expression(text, self._tokenizer)
        if expression is None or limit <= 0:
            return []

        def query(connection: apsw.Connection) -> list[MemoryHit]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            rows = fetch_all(
                connection,
                f"SELECT {CHUNK_COLUMNS}, bm25(memory_chunks_fts) AS score FROM memory_chunks_fts"
                " JOIN memory_chunks c ON c.rowid = memory_chunks_fts.rowid JOIN messages m ON m.rowid = c.rowid"
                " WHERE memory_chunks_fts MATCH ? AND c.chat = ? ORDER BY score LIMIT ?",
                (expression, chat_key, limit),
            )
            return [MemoryHit(chunk_from_row(row), float(row[7])) for row in rows]

        return await self._db.run(query)

    async def nearest(self, chat: ChatRef, vector: npt.NDArray[np.float32], *, limit: int) -> list[MemoryHit]:
        """The chat's `limit` memories nearest to `vector` (score = cosine distance), closest first."""
        import numpy as np

        if limit <= 0:
            return []
        blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()

        def query(connection: apsw.Connection) -> list[MemoryHit]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None or not table_exists(connection, MEMORY_VECTORS):
                return []
            neighbours = fetch_all(
                connection,
                f"SELECT rowid, distance FROM {MEMORY_VECTORS} WHERE embedding MATCH ? AND k = ? AND chat_key = ?"
                " ORDER BY distance",
                (blob, limit, chat_key),
            )
            if not neighbours:
                return []
            distances = {int(rowid): float(distance) for rowid, distance in neighbours}
            marks = ",".join("?" * len(distances))
            rows = fetch_all(
                connection, f"SELECT {CHUNK_COLUMNS} FROM {CHUNK_FROM} WHERE c.rowid IN ({marks})", list(distances)
            )
            chunks = {int(row[0]): chunk_from_row(row) for row in rows}
            return [MemoryHit(chunks[r], d) for r, d in distances.items() if r in chunks]

        return await self._db.run(query)
