"""`SqliteStore`: the storage protocol on one klaw.db file."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import apsw

from klaw.config import FullTextTokenizer
from klaw.store.protocol import StoreCounts, VectorIndex
from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, utc_now
from klaw.store.shared.migrations import said_migrated
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase, database_error
from klaw.store.sqlite.counts import store_counts
from klaw.store.sqlite.embedding_jobs import SqliteEmbeddingJobs
from klaw.store.sqlite.history import SqliteHistory, exchange_messages_in
from klaw.store.sqlite.job_ledger import JobLedger
from klaw.store.sqlite.memory_chunks import SqliteMemoryChunks
from klaw.store.sqlite.messages import SqliteMessages
from klaw.store.sqlite.migrations import current_version, migrate_when_free, require_current
from klaw.store.sqlite.query import fetch_all
from klaw.store.sqlite.read_cache import TableGenerations
from klaw.store.sqlite.search import SqliteSearch
from klaw.store.sqlite.segments import SqliteSegments
from klaw.store.sqlite.sends import SqliteSends
from klaw.store.sqlite.sessions import SqliteExchanges, SqliteSessions
from klaw.store.sqlite.settings import SqliteSettings
from klaw.store.sqlite.tokenizers import bind_tokenizer
from klaw.store.sqlite.vector_cache import ChatVectorCache
from klaw.store.sqlite.vector_floats import FloatFile
from klaw.store.sqlite.vector_puts import SqliteVectorPuts
from klaw.store.sqlite.vector_snapshot import SNAPSHOT_MIN_ROWS, SnapshotFolder
from klaw.store.sqlite.vectors import SqliteVectors
from klaw.store.summaries.records import SUMMARY_TARGET
from klaw.store.summaries.sqlite.repository import SqliteSummaries
from klaw.store.work_protocol import ChatLeaseRepository

DEFAULT_VECTOR_CACHE_BYTES = 512 * 1024 * 1024
DEFAULT_VECTOR_SEARCH_THREADS = 2


class SqliteStore:
    def __init__(
        self,
        db: SqliteDatabase,
        clock: Callable[[], datetime],
        vector_cache_bytes: int = DEFAULT_VECTOR_CACHE_BYTES,
        vector_search_threads: int = DEFAULT_VECTOR_SEARCH_THREADS,
        vector_snapshot_min_rows: int = SNAPSHOT_MIN_ROWS,
        tokenizer: FullTextTokenizer = "porter",
        floats: FloatFile | None = None,
    ) -> None:
        self.db = db
        self.floats = floats  # the exact rescore's float rows beside klaw.db (decision 534)
        self.tokenizer = tokenizer
        chats = ChatKeys()
        db.after_rollback(chats.forget)  # a rolled-back group of appends may have made a chat (decision 353)
        generations = TableGenerations()  # what the repositories' read caches are valid for (decision 197)
        snapshots = SnapshotFolder.beside(db.path) if vector_cache_bytes > 0 else None
        self.vector_cache = ChatVectorCache(
            vector_cache_bytes, vector_search_threads, snapshots, vector_snapshot_min_rows
        )
        self.messages = SqliteMessages(db, chats, clock, self.vector_cache)
        self.segments = SqliteSegments(db, chats, clock, generations)
        self.search = SqliteSearch(db, chats, self.vector_cache, tokenizer, floats)
        ledger = JobLedger(generations)  # a vector put pays its embedding jobs (decision 229)
        self.vectors = SqliteVectors(db, self.vector_cache, ledger, floats)
        self.settings = SqliteSettings(db)
        self.sends = SqliteSends(db)
        self.sessions = SqliteSessions(db, chats, generations)
        self.exchanges = SqliteExchanges(db, chats)
        self.memory_chunks = SqliteMemoryChunks(db, chats, ledger, tokenizer)
        self.history = SqliteHistory(db, chats)
        self.summaries = SqliteSummaries(
            db, chats, clock, generations, ledger, self.messages.append_in, exchange_messages_in
        )
        # A batch's vectors of every target in one transaction (decision 471).
        puts = {
            MESSAGE_TARGET: self.vectors.put_part,
            SUMMARY_TARGET: self.summaries.put_part,
            MEMORY_TARGET: self.memory_chunks.put_part,
        }
        self.embedding_jobs = SqliteEmbeddingJobs(db, clock, ledger, SqliteVectorPuts(db, ledger, puts))
        # One process opens klaw.db, so no chat needs a lease; its log is the JSONL files.
        self.leases: ChatLeaseRepository | None = None
        self.keeps_log = False

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        clock: Callable[[], datetime] = utc_now,
        vector_cache_bytes: int = DEFAULT_VECTOR_CACHE_BYTES,
        vector_search_threads: int = DEFAULT_VECTOR_SEARCH_THREADS,
        vector_snapshot_min_rows: int = SNAPSHOT_MIN_ROWS,
        tokenizer: FullTextTokenizer = "porter",
        reading: bool = False,
    ) -> SqliteStore:
        """Open (creating if needed) and migrate the database at `path`. `vector_cache_bytes` bounds
        the in-memory copies of chats' vectors that make KNN fast (0 = always sqlite-vec);
        `vector_search_threads` share one search over a large chat; chats of at least
        `vector_snapshot_min_rows` vectors have their in-memory copy saved beside the file. The
        full-text index is bound to `tokenizer` (`IndexMismatchError` when messages are indexed with
        another: store/sqlite/tokenizers.py). `reading`: for a command that only reads, on a disk that
        refused the usual open (connection.py's `_connect`); nothing is written, not even the vectors' copies."""
        db = await SqliteDatabase.open(path, reading=reading)
        if reading:
            vector_cache_bytes = 0
        floats = None if reading else FloatFile.beside(db.path)  # nothing is written when reading
        try:
            if reading:
                await db.run(require_current)
            else:
                said_migrated(str(path), await migrate_when_free(db))
            await db.run(lambda connection: bind_tokenizer(connection, tokenizer))
            if floats is not None:  # a forget erases its rows from the file from now on
                await db.run(floats.attach)
        except apsw.Error as exc:
            with contextlib.suppress(apsw.Error):  # closing a damaged file may fail too; the first error says why
                await db.aclose()
            raise database_error(path, exc) from exc
        except BaseException:
            await db.aclose()
            raise
        return cls(db, clock, vector_cache_bytes, vector_search_threads, vector_snapshot_min_rows, tokenizer, floats)

    async def schema_version(self) -> int:
        return await self.db.run(current_version)

    async def counts(self) -> StoreCounts:
        return await self.db.run(store_counts)

    async def vector_indexes(self) -> list[VectorIndex]:
        def query(connection: apsw.Connection) -> list[VectorIndex]:
            rows = fetch_all(connection, "SELECT table_name, embedder_id, dim FROM index_meta ORDER BY table_name")
            return [VectorIndex(str(name), str(embedder_id), int(dim)) for name, embedder_id, dim in rows]

        return await self.db.run(query)

    def stopping(self) -> None:
        """Nothing to do: klaw.db is a file here, never out of reach."""

    async def aclose(self) -> None:
        if self.db.closed:
            return
        try:
            await self.vectors.persist_cache()  # large chats' int8 copies, so the next start loads them fast
        finally:
            await self.db.aclose()
            if self.floats is not None:
                self.floats.close()
