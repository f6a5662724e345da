"""The store a benchmark builds its data in: a SQLite file in a temporary directory, or, on PostgreSQL,
a schema of its own in the database `database.urlEnv` names, dropped at the end (the figures of both
backends come from the same code; a person's own tables are never touched)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from klaw.config import DatabaseConfig
from klaw.like_ctrl_c import stopped_like_ctrl_c
from klaw.store.protocol import Storage, StorageError

log = logging.getLogger(__name__)

BENCH_SCHEMA = "klaw_bench_{pid}"
# Ended like Ctrl-C while a bench schema exists, so it is dropped: `timeout` and systemd send SIGTERM, a
# closed terminal SIGHUP; each left `klaw_bench_<pid>` with its rows in the person's database (adversary22).
_STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def check_database(database: DatabaseConfig) -> None:
    """`StorageError` naming what is missing (the variable, never its value), before anything is built."""
    if database.backend == "postgres":
        from klaw.store.postgres.connection import dsn_from_env

        dsn_from_env(database.url_env)


@asynccontextmanager
async def bench_store(db_path: Path, database: DatabaseConfig) -> AsyncIterator[Storage]:
    """A fresh store on `database.backend`: the file `db_path`, or a fresh schema of the PostgreSQL database."""
    if database.backend != "postgres":
        from klaw.store.sqlite.store import SqliteStore

        store: Storage = await SqliteStore.open(
            db_path,
            vector_cache_bytes=database.vector_cache_mb * 1024 * 1024,
            vector_search_threads=database.vector_search_threads,
        )
        try:
            yield store
        finally:
            await store.aclose()
        return
    from klaw.store.postgres.connection import dsn_from_env
    from klaw.store.postgres.store import PostgresStore

    variable = database.url_env or ""
    dsn = dsn_from_env(variable)
    with bench_schema(dsn) as search_path:
        store = await PostgresStore.open(
            dsn,
            variable=variable,
            pool_size=database.pool_size,
            search_path=search_path,
            vector_cache_bytes=database.vector_cache_mb * 1024 * 1024,
            vector_search_threads=database.vector_search_threads,
        )
        try:
            yield store
        finally:
            await store.aclose()


@contextmanager
def bench_schema(dsn: str) -> Iterator[list[str]]:
    """`klaw_bench_<pid>` made in the database `dsn` names, yielding the search path that finds it first
    (then the database's own path and pgvector's schema); dropped with all it holds when the block ends,
    however it ends (an error, Ctrl-C)."""
    import psycopg
    from psycopg import sql

    schema = BENCH_SCHEMA.format(pid=os.getpid())
    with psycopg.connect(dsn, autocommit=True) as connection:
        left = connection.execute(
            "SELECT string_agg(nspname, ', ' ORDER BY nspname) FROM pg_namespace WHERE nspname LIKE 'klaw\\_bench\\_%'"
        ).fetchone()
        if left and left[0]:
            log.warning(
                "schemas %s were left by bench runs killed before they could drop them: remove each with"
                " DROP SCHEMA <name> CASCADE once no bench runs",
                left[0],
            )
        # pgvector where the database keeps it (not in the bench schema, dropped at the end), on the path.
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        row = connection.execute(
            "SELECT current_schemas(false), (SELECT extnamespace::regnamespace::text FROM pg_extension"
            " WHERE extname = 'vector')"
        ).fetchone()
        path = [str(name) for name in row[0]] if row else []
        if row and row[1] and row[1] not in path:
            path.append(str(row[1]))
        try:  # never one already there: a run elsewhere with the same process id would lose its tables
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        except psycopg.errors.DuplicateSchema:
            raise StorageError(
                f"the database already holds a schema {schema} (another bench run with this process id, or one"
                f" killed): klaw bench leaves it alone; drop it (DROP SCHEMA {schema} CASCADE) if no bench runs"
            ) from None
    with stopped_like_ctrl_c(*_STOPPING_SIGNALS):  # the bench's Ctrl-C path drops the schema
        try:
            yield [schema, *path]
        finally:
            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def engine_database(database: DatabaseConfig) -> Iterator[DatabaseConfig]:
    """The `database` section an engine started in this process opens for a bench: on PostgreSQL, the
    variable `database.urlEnv` names holds, while the block runs, its connection string with the bench
    schema first on every connection's search path (`bench_schema`; the engine opens its store from that
    variable, and an error still names it); SQLite's section as it is."""
    if database.backend != "postgres":
        yield database
        return
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from klaw.store.postgres.connection import dsn_from_env

    variable = database.url_env or ""
    dsn = dsn_from_env(variable)
    original = os.environ[variable]
    with bench_schema(dsn) as search_path:
        options = str(conninfo_to_dict(dsn).get("options") or "")
        schemas = ",".join(search_path)
        os.environ[variable] = make_conninfo(dsn, options=f"{options} -c search_path={schemas}".strip())
        try:
            yield database
        finally:
            os.environ[variable] = original
