"""Numbered schema migrations for the PostgreSQL store, as SQLite's (`store/sqlite/migrations.py`).

Files `NNNN_description.sql` in `migrations/` beside this module, each applied in one transaction and
recorded in `schema_version`. Several engines may start against one database at once, so migrating
holds an advisory lock: the second waits, then finds nothing left to do. A database newer than this
klaw refuses to open.
"""

from __future__ import annotations

import time

from klaw.store.postgres.connection import Connection, execute, fetch_value
from klaw.store.shared.migrations import Migration, SchemaMove, bundled_migrations, pending

MIGRATION_LOCK = 0x6B6C6177  # "klaw": the advisory lock key held while migrating


async def current_version(connection: Connection) -> int:
    exists = await fetch_value(connection, "SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    return int(await fetch_value(connection, "SELECT coalesce(max(version), 0) FROM schema_version"))


async def migrate(connection: Connection, migrations: list[Migration] | None = None) -> SchemaMove:
    """Apply every pending migration on an autocommit `connection`; the version found under the lock
    and the resulting one."""
    migrations = bundled_migrations("klaw.store.postgres") if migrations is None else migrations
    await execute(connection, "SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        async with connection.transaction():
            await execute(
                connection,
                "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at bigint NOT NULL)",
            )
        version = found = await current_version(connection)
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
