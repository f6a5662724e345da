"""Numbered schema migrations for klaw.db, the pending ones applied in order inside one transaction.

Migrations are SQL files named `NNNN_description.sql` in the `migrations/` folder beside this
module, read by `store/shared/migrations.py`; `schema_version` records each applied number.
"""

from __future__ import annotations

import time

import apsw

from klaw.store.shared.migrations import Migration, SchemaMove, bundled_migrations, pending
from klaw.store.sqlite.query import fetch_one


def current_version(connection: apsw.Connection) -> int:
    # made only when missing: a connection that may only read (a full disk, decision 431) reads the version
    if fetch_one(connection, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'") is None:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at INTEGER NOT NULL)"
        )
    row = fetch_one(connection, "SELECT max(version) FROM schema_version")
    return int(row[0]) if row and row[0] is not None else 0


def migrate(connection: apsw.Connection, migrations: list[Migration] | None = None) -> SchemaMove:
    """Apply every pending migration, in order, in one transaction that takes the write lock before it
    reads the version: two processes opening an old klaw.db at once (an engine starting, `klaw db info`)
    do not both apply a migration, nor share the work between them; the second waits for the first (the
    busy timeout) and finds nothing to do. A migration that fails leaves the file as it was."""
    migrations = bundled_migrations("klaw.store.sqlite") if migrations is None else migrations
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = found = current_version(connection)
        for migration in pending(migrations, version):
            connection.execute(migration.sql)
            connection.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
            version = migration.version
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return SchemaMove(found, version)


def require_current(connection: apsw.Connection) -> None:
    """For a connection that may only read (a full disk, decision 431): a file that needs a migration is
    refused as a write would be (`ReadOnlyError`, which the store words by the disk's trouble)."""
    if pending(bundled_migrations("klaw.store.sqlite"), current_version(connection)):
        raise apsw.ReadOnlyError("klaw.db needs moving to this klaw's schema, which writes to it")
