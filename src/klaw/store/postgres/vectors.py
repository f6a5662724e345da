"""Vectors in pgvector tables, each bound to one embedder through `index_meta`, as in SQLite.

`message_vectors` and `memory_vectors` refuse vectors of another embedder (`IndexMismatchError`,
`klaw reindex` re-embeds) and are re-bound while empty; summary vectors are dropped and re-queued
instead (summaries/postgres/repository.py). The column type is `vector` without a dimension: the bound
embedder's dimension is checked here, before anything is written.

Search scans this engine's int8 copy of the chat's vectors (`vector_cache.py`, decision 221) and
rescores its shortlist here; without a copy it is exact in the server: `embedding <=> query` over the
chat's rows, found through the (chat, segment, time) index, then sorted. A chat's vectors are a small
share of the table, so the scan reads only them; an HNSW index would search the whole table and filter
after, and measured no faster (decisions 130 and 210). Every insert also changes the chat's
`vector_marks` version (by trigger, migration 0008), which tells each engine's copy it is stale.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_all, fetch_one, fetch_value
from klaw.store.postgres.vector_cache import PostgresVectorCache
from klaw.store.postgres.vector_puts import PutPart, run_puts
from klaw.store.protocol import StorageError, VectorIndex, embedder_mismatch
from klaw.store.records import MESSAGE_TARGET
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.shared.vector_binding import bound
from klaw.store.shared.vector_lru import VectorRow

MESSAGE_VECTORS = "message_vectors"
MEMORY_VECTORS = "memory_vectors"
SUMMARY_VECTORS = "summary_vectors"


async def bound_embedder(connection: Connection, table: str) -> tuple[str, int] | None:
    row = await fetch_one(connection, "SELECT embedder_id, dim FROM index_meta WHERE table_name = %s", (table,))
    return None if row is None else (str(row[0]), int(row[1]))


async def record_embedder(connection: Connection, table: str, embedder_id: str, dim: int) -> None:
    await execute(
        connection,
        "INSERT INTO index_meta (table_name, embedder_id, dim, created_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (table_name) DO UPDATE SET embedder_id = excluded.embedder_id, dim = excluded.dim",
        (table, embedder_id, dim, int(time.time() * 1000)),
    )


async def bind_table(connection: Connection, table: str, embedder_id: str, dim: int) -> None:
    """Record `table`'s embedder; `IndexMismatchError` when it holds vectors of another one."""
    bound = await bound_embedder(connection, table)
    if bound is not None and bound != (embedder_id, dim):
        stored = int(await fetch_value(connection, f"SELECT count(*) FROM {table}"))
        if (mismatch := embedder_mismatch(table, stored, bound, (embedder_id, dim))) is not None:
            raise mismatch
    await record_embedder(connection, table, embedder_id, dim)


def checked(
    vectors: Sequence[tuple[int, npt.NDArray[np.float32]]], dim: int, what: str
) -> list[tuple[int, npt.NDArray[np.float32]]]:
    """Each vector as float32, once all are checked against the bound `dim` (a wrong size names its row)."""
    for rowid, vector in vectors:
        if vector.shape != (dim,):
            raise StorageError(f"vector for {what} {rowid} has shape {vector.shape}, expected ({dim},)")
    return [(rowid, np.ascontiguousarray(vector, dtype=np.float32)) for rowid, vector in vectors]


def query_vector(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.ascontiguousarray(vector, dtype=np.float32)


class PostgresVectors:
    def __init__(
        self, db: PostgresDatabase, cache: PostgresVectorCache | None = None, paid: PaidJobs | None = None
    ) -> None:
        self._db = db
        self._paid = paid if paid is not None else PaidJobs()  # the put pays its embedding jobs (decision 229)
        self._cache = cache if cache is not None else PostgresVectorCache(0)
        self._dim: int | None = None

    async def bind_embedder(self, embedder_id: str, dim: int) -> None:
        async with self._db.transaction() as connection:
            await bind_table(connection, MESSAGE_VECTORS, embedder_id, dim)
        self._dim = dim

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        if not vectors:
            return 0
        return (await run_puts(self._db, self._paid, [self.put_part(vectors)]))[0]

    def put_part(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> PutPart:
        """`put` as one part of a transaction storing several targets' vectors (vector_puts.py)."""
        rows = checked(vectors, bound(self._dim, "message"), "message")
        by_rowid = dict(rows)

        async def insert(connection: Connection) -> tuple[int, Callable[[], None]]:
            # one statement for the batch, not one per vector
            inserted = await fetch_all(
                connection,
                f"INSERT INTO {MESSAGE_VECTORS} (rowid, chat, segment_id, created_at, embedding)"
                " SELECT m.rowid, m.chat, m.segment_id, m.created_at, v.embedding"
                " FROM unnest(%s::bigint[], %s::vector[]) AS v(rowid, embedding)"
                " JOIN messages m ON m.rowid = v.rowid"
                " ON CONFLICT (rowid) DO NOTHING RETURNING rowid, chat, segment_id, created_at",
                ([rowid for rowid, _ in rows], [vector for _, vector in rows]),
            )
            added: dict[int, list[VectorRow]] = {}
            for rowid, chat, segment, created in sorted(inserted):
                added.setdefault(int(chat), []).append((int(rowid), int(segment), int(created), by_rowid[rowid]))
            # The marks this insert set (its row locks held until commit): which versions it replaced.
            marks = await fetch_all(
                connection, "SELECT chat, version, previous FROM vector_marks WHERE chat = ANY(%s)", (sorted(added),)
            )

            def committed() -> None:  # now the cached copies may take them
                for chat, version, previous in marks:
                    self._cache.added(int(chat), added[int(chat)], int(version), int(previous))

            return len(inserted), committed

        return PutPart(MESSAGE_TARGET, list(by_rowid), insert, self._cache.writing)

    async def count(self) -> int:
        async with self._db.connection() as connection:
            return int(await fetch_value(connection, f"SELECT count(*) FROM {MESSAGE_VECTORS}"))

    async def bound_embedder(self) -> VectorIndex | None:
        async with self._db.connection() as connection:
            bound = await bound_embedder(connection, MESSAGE_VECTORS)
        return None if bound is None else VectorIndex(MESSAGE_VECTORS, *bound)
