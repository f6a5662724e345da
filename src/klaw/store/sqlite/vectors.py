"""Message vectors in a sqlite-vec `vec0` table, bound to one embedder through `index_meta`.

The table is partitioned by chat (`chat_key`) and carries `segment_id` and `created_at` as
metadata columns, so per-chat, per-segment and time-bounded KNN can be answered inside sqlite-vec.
Searches normally go through `ChatVectorCache` (int8 in memory, much faster); every committed insert
is passed on to it so a cached chat never misses a vector, and raises the chat's `vector_marks`
version in the same transaction, so a copy saved beside the database knows it is stale.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import apsw

from klaw.store.protocol import VectorIndex
from klaw.store.records import MESSAGE_TARGET
from klaw.store.shared.vector_binding import bound
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.job_ledger import JobLedger
from klaw.store.sqlite.query import fetch_one
from klaw.store.sqlite.vector_cache import ChatVectorCache
from klaw.store.sqlite.vector_floats import Binding, FloatFile
from klaw.store.sqlite.vector_puts import PutPart, put_one
from klaw.store.sqlite.vector_snapshot import bump_version
from klaw.store.sqlite.vector_tables import bind_vector_table, bound_embedder, table_exists, vector_blobs, vector_count

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

MESSAGE_VECTORS = "vec_messages"
FILL_BATCH = 2000  # vectors a call of the float file's fill: ~0.1 s of the database thread
# Partitioned by chat; segment and time as metadata columns so scoped KNN stays inside sqlite-vec.
MESSAGE_VECTOR_COLUMNS = (
    "chat_key integer partition key, embedding float[{dim}] distance_metric=cosine,"
    " segment_id integer, created_at integer, chunk_size=128"
)
# The name search.py imports; the check itself is vector_tables.py's.
vector_table_exists = table_exists


class SqliteVectors:
    def __init__(
        self, db: SqliteDatabase, cache: ChatVectorCache, ledger: JobLedger, floats: FloatFile | None = None
    ) -> None:
        self._db = db
        self._cache = cache
        self._ledger = ledger  # the put pays the vectors' embedding jobs (job_ledger.py)
        self._floats = floats  # each put's float rows, for the exact rescore (vector_floats.py)
        self._dim: int | None = None

    async def bind_embedder(self, embedder_id: str, dim: int) -> None:
        def bind(connection: apsw.Connection) -> None:
            if bind_vector_table(connection, MESSAGE_VECTORS, MESSAGE_VECTOR_COLUMNS, embedder_id, dim):
                self._cache.invalidate()  # the cached copies were another embedder's (the table was empty)
            self._dim = dim
            if self._floats is not None:
                bound_at = fetch_one(
                    connection, "SELECT created_at FROM index_meta WHERE table_name = ?", (MESSAGE_VECTORS,)
                )
                if bound_at is not None:
                    self._floats.bind(Binding(embedder_id, dim, int(bound_at[0])))

        await self._db.run(bind)

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        return 0 if not vectors else await put_one(self._db, self._ledger, self.put_part(vectors))

    def put_part(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> PutPart:
        """`put` as one part of a transaction storing several targets' vectors (vector_puts.py): its rows
        and the chats' `vector_marks` versions inside, the in-memory copies told after the commit."""
        import numpy as np

        blobs = vector_blobs(vectors, bound(self._dim, "message"), "message")
        vectors_by_rowid = {rowid: np.asarray(v, dtype=np.float32) for rowid, v in vectors}

        def insert(connection: apsw.Connection) -> tuple[int, Callable[[], None]]:
            added: dict[int, list[tuple[int, int, int, npt.NDArray[np.float32]]]] = {}
            for rowid, blob in blobs:
                if fetch_one(connection, f"SELECT 1 FROM {MESSAGE_VECTORS} WHERE rowid = ?", (rowid,)):
                    continue
                meta = fetch_one(
                    connection, "SELECT chat, segment_id, created_at FROM messages WHERE rowid = ?", (rowid,)
                )
                if meta is None:
                    continue
                connection.execute(
                    f"INSERT INTO {MESSAGE_VECTORS} (rowid, chat_key, embedding, segment_id, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (rowid, meta[0], blob, meta[1], meta[2]),
                )
                added.setdefault(meta[0], []).append((rowid, meta[1], meta[2], vectors_by_rowid[rowid]))
            versions = {chat_key: bump_version(connection, chat_key) for chat_key in added}
            if self._floats is not None:  # before the commit: a committed vector's slot is written (vector_floats.py)
                self._floats.write((row[0], row[3]) for rows in added.values() for row in rows)

            def committed() -> None:  # now the cached copies may see them
                for chat_key, rows in added.items():
                    self._cache.added(chat_key, rows, versions[chat_key])
                if self._floats is not None and self._floats.pending():
                    repair_floats(connection, self._floats)

            return sum(len(rows) for rows in added.values()), committed

        return PutPart(MESSAGE_TARGET, list(vectors_by_rowid), insert)

    async def repair_floats(self) -> int:
        """Rewrite the float rows searches found missing or disagreeing (vector_floats.py); how many."""
        floats = self._floats
        return 0 if floats is None else await self._db.run(lambda connection: repair_floats(connection, floats))

    async def warm_cache(self) -> int:
        """Load the most recently active chats' vectors into memory while they fit, so the first
        search after a start does not pay for it. Returns chats loaded.

        One pass over `vec_messages`, whatever the number of chats: a query per chat cost ~35 ms
        each (a vec0 partition lookup plus a count), 105 s before the socket opened for 3,050 chats.
        The engine runs this after it listens; a search meanwhile waits behind it on the database
        thread, or loads its own chat if warming did not reach it."""
        dim = self._dim
        if dim is None:
            return 0
        return await self._db.run(lambda connection: self._cache.warm(connection, MESSAGE_VECTORS, dim))

    async def fill_floats(self, batch: int = FILL_BATCH) -> int:
        """Write the vectors the float file lacks (it was missing, damaged or another binding's: started
        again empty) from `vec_messages`, `batch` at a time behind the turns' writes. Returns how many."""
        floats = self._floats
        if floats is None:
            return 0
        started = time.perf_counter()
        missing = await self._db.run(lambda connection: floats.unlisted(connection, MESSAGE_VECTORS), behind=True)
        filled = 0
        for first in range(0, len(missing), batch):
            part = missing[first : first + batch]
            filled += await self._db.run(
                lambda connection, part=part: floats.copy(connection, MESSAGE_VECTORS, part),  # type: ignore[misc]
                behind=True,
            )
        if filled:
            log.info(
                "wrote %d vectors to %s from the database in %.1f s",
                filled,
                floats.path.name,
                time.perf_counter() - started,
            )
        return filled

    async def persist_cache(self) -> int:
        """Save the cached copies of large chats beside the database (at close), so the next start
        loads them without scanning the table. Returns chats saved."""
        return await self._db.run(lambda connection: self._cache.persist(connection, MESSAGE_VECTORS))

    async def count(self) -> int:
        return await self._db.run(lambda connection: vector_count(connection, MESSAGE_VECTORS))

    async def bound_embedder(self) -> VectorIndex | None:
        def query(connection: apsw.Connection) -> VectorIndex | None:
            bound = bound_embedder(connection, MESSAGE_VECTORS)
            return None if bound is None else VectorIndex(MESSAGE_VECTORS, *bound)

        return await self._db.run(query)


def repair_floats(connection: apsw.Connection, floats: FloatFile) -> int:
    """`FloatFile.repair` from `vec_messages`, after a commit: a failure is logged, never the put's."""
    try:
        return floats.repair(connection, MESSAGE_VECTORS)
    except apsw.Error as exc:
        log.warning("could not repair the float vectors file from the database (%s)", type(exc).__name__)
        return 0
