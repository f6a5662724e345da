"""The configured storage backend (`database.backend`): the live store, or a rebuild beside it.

The one place that names an implementation, so the engine's tools that need a store (the CLI, `klaw
reindex`) depend on the storage protocol only. Backends are imported when asked for: apsw and
sqlite-vec load only for commands that open the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from klaw.config import DatabaseConfig
from klaw.store.errors import StoreNotSetUp
from klaw.store.protocol import Storage, StorageError
from klaw.store.rebuild_protocol import KeptLog, RebuildBackend
from klaw.store.records import utc_now


def store_line(path: Path, database: DatabaseConfig) -> str:
    """/status's line naming the home's store, so a person (or a program's author whose config chose it)
    sees which one the running engine uses: the SQLite file, or the environment variable naming the
    PostgreSQL database (never the connection string: it holds a password)."""
    if database.backend == "postgres":
        return f"Store: PostgreSQL, the database ${database.url_env} names"
    return f"Store: SQLite, {path}"


async def open_storage(
    path: Path,
    database: DatabaseConfig,
    *,
    clock: Callable[[], datetime] = utc_now,
    reading: bool = False,
    creating: bool = False,
) -> Storage:
    """Open the configured store, brought to this klaw's schema: the SQLite file at `path`, or the PostgreSQL
    database named by the environment variable `database.urlEnv`; `StorageError` says why not. `creating`:
    set it up where klaw never did (the engine's start); a command (`klaw db info`, `klaw memory …`) leaves
    such a database as it is, no file or table made, and gets `StoreNotSetUp` to word (decision 467); an
    SQLite file without klaw's tables is one too, and the start refuses one of another program's (decision 478).
    `reading`: klaw.db for a command that only reads, where the disk refused the usual open (decision 431)."""
    if database.backend == "postgres":
        from klaw.store.postgres.connection import dsn_from_env
        from klaw.store.postgres.store import PostgresStore

        variable = database.url_env or ""
        return await PostgresStore.open(
            dsn_from_env(variable),
            variable=variable,
            clock=clock,
            pool_size=database.pool_size,
            wait_seconds=database.wait_seconds,
            vector_cache_bytes=database.vector_cache_mb * 1024 * 1024,
            vector_search_threads=database.vector_search_threads,
            set_up_only=not creating,
        )
    exists = await asyncio.to_thread(path.exists)
    if not creating and not exists:
        raise StoreNotSetUp(f"{path} does not exist yet: it is created when the engine first starts")
    from klaw.store.sqlite.foreign_file import not_klaws
    from klaw.store.sqlite.store import SqliteStore

    if exists and (refusal := await asyncio.to_thread(not_klaws, path, creating=creating, reading=reading)):
        raise refusal

    return await SqliteStore.open(
        path,
        clock=clock,
        vector_cache_bytes=database.vector_cache_mb * 1024 * 1024,
        vector_search_threads=database.vector_search_threads,
        tokenizer=database.tokenizer,
        reading=reading,
    )


async def start_problem(database: DatabaseConfig, connect_timeout: float = 10.0) -> StorageError | None:
    """What would stop an engine's start on the configured PostgreSQL database, found without changing it
    (`klaw config check`; store/postgres/migrations.py's `start_problem`); None for SQLite, whose file the
    caller checks itself, and when nothing would."""
    if database.backend != "postgres":
        return None
    from klaw.store.postgres.connection import dsn_from_env
    from klaw.store.postgres.migrations import start_problem as postgres_start_problem

    try:
        dsn = dsn_from_env(database.url_env)
    except StorageError as exc:
        return exc
    return await postgres_start_problem(dsn, database.url_env or "", connect_timeout)


def rebuild_backend(live: Path, database: DatabaseConfig) -> RebuildBackend:
    """Where `klaw reindex` builds a new store for the one at `live`."""
    if database.backend == "postgres":
        from klaw.store.postgres.connection import dsn_from_env
        from klaw.store.postgres.reindex_build import PostgresRebuild

        return PostgresRebuild(dsn_from_env(database.url_env), database.url_env or "")
    from klaw.store.sqlite.rebuild import SqliteRebuild

    return SqliteRebuild(live, database.tokenizer)


def kept_log(live: Path, database: DatabaseConfig) -> KeptLog | None:
    """The log the configured store keeps itself (PostgreSQL's `log_records`), for `klaw log check` and
    `klaw log export`; None when the log is the home's JSONL files (SQLite)."""
    return rebuild_backend(live, database).kept_log() if database.backend == "postgres" else None


def storage_failure(path: Path, database: DatabaseConfig, exc: BaseException) -> StorageError | None:
    """The backend's own error raised outside `open_storage` (e.g. SQLite busy part-way through an engine's
    start-up, when another klaw process holds the file; a PostgreSQL table missing part-way through `klaw
    log check`) as a `StorageError` a person can read: PostgreSQL's names the variable `database.urlEnv`
    names, with every piece of that variable's value masked in the server's text; None when `exc` is not
    the backend's."""
    import apsw
    import psycopg

    from klaw.store.sqlite.connection import database_error

    if isinstance(exc, psycopg.Error):
        from klaw.store.postgres.connection import server_error

        return server_error(database.url_env or "database.urlEnv", exc)

    return database_error(path, exc) if isinstance(exc, apsw.Error) else None


def migration_backend(sqlite_file: Path, variable: str) -> RebuildBackend:
    """Where `klaw db migrate --to postgres` rebuilds the home from its log: the PostgreSQL database the
    environment variable `variable` names (`StorageError` when it is unset)."""
    from klaw.store.postgres.connection import dsn_from_env
    from klaw.store.postgres.rebuild import PostgresMigration

    return PostgresMigration(dsn_from_env(variable), variable, sqlite_file)
