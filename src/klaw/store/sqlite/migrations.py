"""Numbered schema migrations for klaw.db, applied in order inside one transaction each.

Migrations are SQL files named `NNNN_description.sql` in the `migrations/` folder beside this
module, read by `store/shared/migrations.py`; `schema_version` records each applied number.
"""

from __future__ import annotations

import time

import apsw

from klaw.store.shared.migrations import Migration, bundled_migrations, pending
from klaw.store.sqlite.query import fetch_one


def current_version(connection: apsw.Connection) -> int:
    connection.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at INTEGER NOT NULL)"
    )
    row = fetch_one(connection, "SELECT max(version) FROM schema_version")
    return int(row[0]) if row and row[0] is not None else 0


def migrate(connection: apsw.Connection, migrations: list[Migration] | None = None) -> int:
    """Apply every pending migration; return the resulting version."""
    migrations = bundled_migrations("klaw.store.sqlite") if migrations is None else migrations
    version = current_version(connection)
    for migration in pending(migrations, version):
        with connection:
            connection.execute(migration.sql)
            connection.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
        version = migration.version
    return version
