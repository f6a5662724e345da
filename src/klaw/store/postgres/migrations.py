"""Numbered schema migrations for the PostgreSQL store, as SQLite's (`store/sqlite/migrations.py`).

Files `NNNN_description.sql` in `migrations/` beside this module, each applied in one transaction and
recorded in `schema_version`. Several engines may start against one database at once, so migrating
holds an advisory lock: the second waits, then finds nothing left to do. A database newer than this
klaw refuses to open. `start_problem` says beforehand, changing nothing, what would stop a start here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg

from klaw.start_notes import note
from klaw.store.postgres.connection import Connection, execute, fetch_value, server_error, vector_not_creatable
from klaw.store.postgres.path_checks import open_problem
from klaw.store.protocol import StorageError
from klaw.store.shared.migrations import Migration, SchemaMove, bundled_migrations, pending

MIGRATION_LOCK = 0x6B6C6177  # "klaw": the advisory lock key held while migrating


async def current_version(connection: Connection) -> int:
    exists = await fetch_value(connection, "SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    return int(await fetch_value(connection, "SELECT coalesce(max(version), 0) FROM schema_version"))


async def migrate(connection: Connection, migrations: list[Migration] | None = None) -> SchemaMove:
    """Apply every pending migration on an autocommit `connection`; the version found under the lock
    and the resulting one. Its caller (`PostgresStore.open`) has first ruled out what `path_checks.open_problem`
    finds: klaw's tables off the search path's first schema would be made again, empty, there."""
    migrations = bundled_migrations("klaw.store.postgres") if migrations is None else migrations
    await execute(connection, "SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        # Made only when missing: even IF NOT EXISTS needs CREATE on the schema, which a user that may only
        # use a store another made lacks (adversary22: refused as if it could not create the tables). Looked
        # for in the schema it would be made in (the search path's first), not anywhere on the path: a bench's
        # or a reindex's schema comes before the person's own klaw tables, which must never be migrated into.
        made = "SELECT to_regclass(format('%%I.schema_version', current_schema())) IS NOT NULL"
        if not await fetch_value(connection, made):
            async with connection.transaction():
                await execute(
                    connection,
                    "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at bigint NOT NULL)",
                )
        version = found = await current_version(connection)
        if found and (steps := pending(migrations, version)):  # decision 513, as the SQLite runner says it
            moved = f"schema version {found} to {steps[-1].version}"
            note(f"moving the PostgreSQL database from {moved}, once after an upgrade")
        for migration in pending(migrations, version):
            async with connection.transaction():
                await connection.execute(migration.sql.encode())  # several statements, no parameters
                await execute(
                    connection,
                    "INSERT INTO schema_version (version, name, applied_at) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, int(time.time() * 1000)),
                )
            version = migration.version
    finally:
        await execute(connection, "SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    return SchemaMove(found, version)


@asynccontextmanager
async def _looked_at(dsn: str, variable: str, connect_timeout: float) -> AsyncIterator[Connection]:
    """An autocommit connection for questions that change nothing, once what would stop any open is ruled
    out (`path_checks.open_problem`, raised as `StorageError`); psycopg's errors pass through to be worded."""
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout))
    ) as connection:
        if (problem := await open_problem(connection, variable)) is not None:
            raise StorageError(problem)
        yield connection


async def start_problem(dsn: str, variable: str, connect_timeout: float) -> StorageError | None:
    """What would stop an engine's start on the database `dsn` names, found without changing it (`klaw config
    check`): the server out of reach, a wrong password or database, a value that is not a connection string
    (`server_error`'s words, naming `variable`, never the DSN); a schema newer than this klaw's (the engine's
    refusal); klaw's tables or pgvector out of the search path's sight, a move into it left unfinished
    (`path_checks.py`); for a database klaw has still to set up, no pgvector on the server, or a user who may not create
    tables in its schema. None: the engine's start would get past its database."""
    try:
        async with _looked_at(dsn, variable, connect_timeout) as connection:
            version = await current_version(connection)
            if not pending(bundled_migrations("klaw.store.postgres"), version):
                return None
            # pgvector: created in the database, installed on the server, and creatable by this user (a superuser;
            # a trusted extension's, whoever may create in the database). A non-superuser's start was refused
            # with "permission denied to create extension" while this said valid (newcomer19).
            vector = await connection.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'),"
                " EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector'),"
                " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR EXISTS (SELECT 1 FROM"
                " pg_available_extension_versions v JOIN pg_available_extensions e ON e.name = v.name AND"
                " e.default_version = v.version WHERE v.name = 'vector' AND v.trusted)"
                " AND has_database_privilege(current_database(), 'CREATE')"
            )
            created, installed, may_create_vector = await vector.fetchone() or (False, False, False)
            schema = await fetch_value(connection, "SELECT current_schema()")
            may_create = schema is not None and await fetch_value(
                connection, "SELECT has_schema_privilege(current_schema(), 'CREATE')"
            )
    except StorageError as exc:  # what would stop any open (`path_checks.py`), a newer schema (`pending`)
        return exc
    except psycopg.Error as exc:
        return server_error(variable, exc)
    if not may_create:
        where = f"schema {schema}" if schema is not None else "any schema of its search_path"
        return StorageError(
            f"the database user of {variable} may not create klaw's tables in {where}: grant it CREATE there"
            f" (GRANT CREATE ON SCHEMA {schema or 'public'} TO that user) or make it the database's owner"
            " (docs/postgres.md)"
        )
    if not (created or installed):
        return StorageError(
            f"the PostgreSQL server named by {variable} lacks the pgvector extension: install pgvector 0.8 or"
            " newer there (docs/postgres.md), or have an administrator run CREATE EXTENSION vector in the database"
        )
    if installed and not created and not may_create_vector:  # said after the tables' grant, in turn
        return vector_not_creatable(variable, "not a superuser")
    return None
