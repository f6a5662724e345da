"""Numbered schema migrations for klaw.db, applied in order inside one transaction each.

Migrations are SQL files named `NNNN_description.sql` in the `migrations/` folder beside this
module; `schema_version` records each applied number. A database newer than this klaw refuses to
open instead of being damaged by old code.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from importlib import resources

import apsw

from klaw.store.protocol import StorageError
from klaw.store.sqlite.query import fetch_one

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def bundled_migrations() -> list[Migration]:
    folder = resources.files("klaw.store.sqlite").joinpath("migrations")
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


def current_version(connection: apsw.Connection) -> int:
    connection.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at INTEGER NOT NULL)"
    )
    row = fetch_one(connection, "SELECT max(version) FROM schema_version")
    return int(row[0]) if row and row[0] is not None else 0


def migrate(connection: apsw.Connection, migrations: list[Migration] | None = None) -> int:
    """Apply every pending migration; return the resulting version."""
    migrations = bundled_migrations() if migrations is None else migrations
    version = current_version(connection)
    newest = migrations[-1].version if migrations else 0
    if version > newest:
        raise StorageError(
            f"the database is at schema version {version} but this klaw knows only {newest}: upgrade klaw"
        )
    for migration in migrations:
        if migration.version <= version:
            continue
        with connection:
            connection.execute(migration.sql)
            connection.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, int(time.time() * 1000)),
            )
        version = migration.version
    return version
