"""Numbered schema migrations for the PostgreSQL store, as SQLite's (`store/sqlite/migrations.py`).

Files `NNNN_description.sql` in `migrations/` beside this module, each applied in one transaction and
recorded in `schema_version`. Several engines may start against one database at once, so migrating
holds an advisory lock: the second waits, then finds nothing left to do. A database newer than this
klaw refuses to open.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources

from klaw.store.postgres.connection import Connection, execute, fetch_value
from klaw.store.protocol import StorageError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
MIGRATION_LOCK = 0x6B6C6177  # "klaw": the advisory lock key held while migrating


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def bundled_migrations() -> list[Migration]:
    folder = resources.files("klaw.store.postgres").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StorageError(f"migration numbers must run 1..n without gaps, found {versions}")
    return found


async def current_version(connection: Connection) -> int:
    exists = await fetch_value(connection, "SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    return int(await fetch_value(connection, "SELECT coalesce(max(version), 0) FROM schema_version"))


async def migrate(connection: Connection, migrations: list[Migration] | None = None) -> int:
    """Apply every pending migration on an autocommit `connection`; return the resulting version."""
    migrations = bundled_migrations() if migrations is None else migrations
    newest = migrations[-1].version if migrations else 0
    await execute(connection, "SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        async with connection.transaction():
            await execute(
                connection,
                "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at bigint NOT NULL)",
            )
        version = await current_version(connection)
        if version > newest:
            raise StorageError(
                f"the database is at schema version {version} but this klaw knows only {newest}: upgrade klaw"
            )
        for migration in migrations:
            if migration.version <= version:
                continue
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
    return version
