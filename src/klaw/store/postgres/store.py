"""`PostgresStore`: the storage protocol on a PostgreSQL database with pgvector.

Opened from the DSN in the environment variable `database.urlEnv` names: what the user's search path or
a move left unfinished would make an engine get wrong is refused first (path_checks.py), the schema is
migrated (under an advisory lock, so engines starting together migrate once; a command's open leaves a
database klaw never set up as it is, decision 467), then a pool of async
connections, each with pgvector's types registered, serves the repositories.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from klaw.cancellation import cancel_requests, deliver_lost_cancellation
from klaw.store.errors import StoreNotSetUp
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, fetch_all, fetch_value, server_error
from klaw.store.postgres.embedding_jobs import PostgresEmbeddingJobs
from klaw.store.postgres.history import PostgresHistory, exchange_messages_in
from klaw.store.postgres.leases import PostgresLeases
from klaw.store.postgres.memory_chunks import PostgresMemoryChunks
from klaw.store.postgres.messages import PostgresMessages
from klaw.store.postgres.migrations import current_version, migrate
from klaw.store.postgres.path_checks import open_problem
from klaw.store.postgres.pool_log import quiet_pool_warnings
from klaw.store.postgres.search import PostgresSearch
from klaw.store.postgres.segments import PostgresSegments
from klaw.store.postgres.sends import PostgresSends
from klaw.store.postgres.sessions import PostgresExchanges, PostgresSessions, PostgresSettings
from klaw.store.postgres.vector_cache import PostgresVectorCache
from klaw.store.postgres.vector_puts import PostgresVectorPuts
from klaw.store.postgres.vectors import MESSAGE_VECTORS, PostgresVectors
from klaw.store.protocol import StorageError, StoreCounts, VectorIndex
from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, utc_now
from klaw.store.shared.migrations import said_migrated
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.shared.record_kinds import control_sql, not_control_sql
from klaw.store.summaries.postgres.repository import PostgresSummaries
from klaw.store.summaries.records import SUMMARY_TARGET
from klaw.store.work_protocol import ChatLeaseRepository

DEFAULT_POOL_SIZE = 8
CONNECT_TIMEOUT_SECONDS = 10
DEFAULT_WAIT_SECONDS = 30.0
# A klaw transaction waits on nothing but the server between its statements, so one idle this long is
# held by a process that stalled (suspended, SIGSTOPped, starved) with the chat's advisory lock or a
# lease row locked; the server ends its session, and the engine that took the chat over goes on
# (docs/decisions/200-lease-fencing.md, addendum).
IDLE_IN_TRANSACTION_SECONDS = 10


async def _first_failure(
    dsn: str, options: dict[str, Any], configure: Callable[[Connection], Awaitable[None]]
) -> psycopg.Error | None:
    """What a connection made as the pool makes its own fails with (the server gone meanwhile, pgvector's type
    not registered): the pool's own timeout says only that it gave up."""
    try:
        async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, **options
        ) as connection:
            await configure(connection)
    except psycopg.Error as exc:
        return exc
    return None


class PostgresStore:
    def __init__(
        self,
        db: PostgresDatabase,
        clock: Callable[[], datetime],
        vector_cache_bytes: int = 0,
        vector_search_threads: int = 2,
    ) -> None:
        self.db = db
        chats = ChatKeys()
        # Chats' int8 vector copies in this process's memory (decision 221); 0 bytes: every search in the server.
        self.vector_cache = PostgresVectorCache(vector_cache_bytes, vector_search_threads)
        self.messages = PostgresMessages(db, chats, clock, self.vector_cache)
        self.segments = PostgresSegments(db, chats, clock)
        self.search = PostgresSearch(db, chats, self.vector_cache)
        paid = PaidJobs()  # a vector put pays its embedding jobs (decision 229)
        self.vectors = PostgresVectors(db, self.vector_cache, paid)
        self.settings = PostgresSettings(db)
        self.sends = PostgresSends(db)
        self.sessions = PostgresSessions(db, chats)
        self.exchanges = PostgresExchanges(db, chats)
        self.memory_chunks = PostgresMemoryChunks(db, chats, paid)
        self.history = PostgresHistory(db, chats)
        self.summaries = PostgresSummaries(db, chats, clock, paid, self.messages.append_in, exchange_messages_in)
        # A batch's vectors of every target in one transaction (decision 471).
        puts = {
            MESSAGE_TARGET: self.vectors.put_part,
            SUMMARY_TARGET: self.summaries.put_part,
            MEMORY_TARGET: self.memory_chunks.put_part,
        }
        self.embedding_jobs = PostgresEmbeddingJobs(db, clock, paid, PostgresVectorPuts(db, paid, puts))
        self.leases: ChatLeaseRepository | None = PostgresLeases(db, chats)
        self.keeps_log = True  # log_records, written by each append

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        variable: str,
        clock: Callable[[], datetime] = utc_now,
        pool_size: int = DEFAULT_POOL_SIZE,
        search_path: Sequence[str] = (),
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        vector_cache_bytes: int = 0,
        vector_search_threads: int = 2,
        moving: bool = False,
        set_up_only: bool = False,
    ) -> PostgresStore:
        """Migrate the database `dsn` names and open a pool on it. `variable` is the environment
        variable the DSN came from: messages name it, never the DSN (it may hold a password).
        `search_path`: the schemas its tables are made and found in, first first (default: the
        server's; `klaw reindex` builds in a schema of its own). `wait_seconds`: how long a call waits for
        a connection (all busy, or the server away) before failing with `StorageUnavailable`.
        `vector_cache_bytes`: memory for chats' int8 vector copies (`database.vectorCacheMb`; 0, the
        default for CLI processes, searches every chat in the server). Refused (`path_checks.py`): klaw's
        tables or pgvector out of the search path's sight; a move into the database left unfinished, unless
        `moving` (the move's own open, `klaw db migrate`, or a reindex's build, each with its journal).
        `set_up_only`: a database klaw never set up is left as it is, `StoreNotSetUp` (a command's open, 467)."""
        options: dict[str, Any] = {"options": f"-c search_path={','.join(search_path)}"} if search_path else {}
        try:
            async with await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, **options
            ) as connection:
                if (problem := await open_problem(connection, variable, moving=moving)) is not None:
                    raise StorageError(problem)
                if set_up_only and await current_version(connection) == 0:
                    raise StoreNotSetUp(
                        f"no klaw database in the PostgreSQL database named by {variable} yet: `klaw serve` sets it up"
                    )
                said_migrated(f"the PostgreSQL database named by {variable}", await migrate(connection))
        except StorageError:
            raise
        except psycopg.Error as exc:
            raise server_error(variable, exc) from exc

        async def configure(connection: Connection) -> None:
            await register_vector_async(connection)
            await connection.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_SECONDS}s'")

        quiet_pool_warnings()  # its raw lines name the server's host (pool_log.py)
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS, **options},
            configure=configure,
            open=False,
            timeout=wait_seconds,
            # A connection is checked as it is handed out: after the server restarted, the pool's old
            # connections are replaced at once instead of each failing one call.
            check=AsyncConnectionPool.check_connection,
        )
        before = cancel_requests()
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
            # Its wait for the first connection, as the wait for a free one, drops a cancellation (Ctrl-C at
            # start) arriving as the connection comes (decision 428): the start stops, as it was asked to.
            deliver_lost_cancellation(before)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await pool.close()
            if isinstance(exc, PoolTimeout):  # "pool initialization incomplete": why its connections failed
                exc = await _first_failure(dsn, options, configure) or exc
            if isinstance(exc, psycopg.Error | PoolTimeout):
                raise server_error(variable, exc) from exc
            raise
        return cls(PostgresDatabase(pool, variable), clock, vector_cache_bytes, vector_search_threads)

    async def schema_version(self) -> int:
        async with self.db.connection() as connection:
            return await current_version(connection)

    async def counts(self) -> StoreCounts:
        async with self.db.connection() as connection:

            async def count(sql: str) -> int:
                return int(await fetch_value(connection, sql) or 0)

            errors = await fetch_all(
                connection,
                "SELECT last_error, count(*) AS jobs FROM embedding_jobs WHERE last_error IS NOT NULL"
                " GROUP BY last_error ORDER BY jobs DESC, last_error",
            )
            return StoreCounts(
                messages=await count(f"SELECT count(*) FROM messages m WHERE {not_control_sql()}"),
                control_records=await count(f"SELECT count(*) FROM messages m WHERE {control_sql()}"),
                chats=await count("SELECT count(*) FROM chats"),
                segments=await count("SELECT count(*) FROM segments"),
                sessions=await count("SELECT count(*) FROM sessions"),
                exchanges=await count("SELECT count(*) FROM exchanges"),
                vectors=await count(f"SELECT count(*) FROM {MESSAGE_VECTORS}"),
                embedding_pending=await count("SELECT count(*) FROM embedding_jobs WHERE status = 'pending'"),
                embedding_failed=await count("SELECT count(*) FROM embedding_jobs WHERE status = 'failed'"),
                embedding_errors=tuple((str(row[0]), int(row[1])) for row in errors),
                message_jobs=(
                    await count("SELECT count(*) FROM embedding_jobs WHERE status = 'pending' AND target = 'message'"),
                    await count("SELECT count(*) FROM embedding_jobs WHERE status = 'failed' AND target = 'message'"),
                ),
            )

    async def vector_indexes(self) -> list[VectorIndex]:
        async with self.db.connection() as connection:
            rows = await fetch_all(
                connection, "SELECT table_name, embedder_id, dim FROM index_meta ORDER BY table_name"
            )
        return [VectorIndex(str(name), str(embedder_id), int(dim)) for name, embedder_id, dim in rows]

    def stopping(self) -> None:
        self.db.stopping()

    async def aclose(self) -> None:
        await self.db.aclose()
