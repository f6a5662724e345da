"""Numbered schema migrations for klaw.db, the pending ones applied in order inside one transaction.

Migrations are SQL files named `NNNN_description.sql` in the `migrations/` folder beside this
module, read by `store/shared/migrations.py`; `schema_version` records each applied number.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import apsw

from klaw.start_notes import note
from klaw.store.shared.migrations import Migration, SchemaMove, bundled_migrations, pending
from klaw.store.sqlite.migration_note import migrating_process, noting_migration
from klaw.store.sqlite.query import fetch_one

if TYPE_CHECKING:
    from klaw.store.sqlite.connection import SqliteDatabase

log = logging.getLogger(__name__)

# How long an opening waits for another process's migration before it gives up (then: "in use by another klaw
# process"). Only a migration holds klaw.db's write lock for longer than the 5 s busy timeout (an engine's writes
# take milliseconds, `klaw reindex` builds in a file of its own), and moving a large home forward takes minutes
# on a small machine: an engine and `klaw db info` started together after an upgrade must not fail for that.
# Only a lock whose holder says it migrates is waited for so (migration_note.py, decision 460).
MIGRATION_WAIT_SECONDS = 600.0


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
    busy timeout, asked again by `migrate_when_free`) and finds nothing to do. A migration that fails leaves
    the file as it was."""
    migrations = bundled_migrations("klaw.store.sqlite") if migrations is None else migrations
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = current_version(connection)
        steps = pending(migrations, found)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    if not steps:
        connection.execute("COMMIT")
        return SchemaMove(found, found)
    if found:  # a new file's first schema is no move (decision 513: said on a terminal while `klaw serve` starts)
        note(f"moving {connection.filename} from schema version {found} to {steps[-1].version}, once after an upgrade")
    with noting_migration(connection.filename):  # an opening meanwhile waits for it (migrate_when_free)
        try:
            for migration in steps:
                connection.execute(migration.sql)
                connection.execute(
                    "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, int(time.time() * 1000)),
                )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
    return SchemaMove(found, steps[-1].version)


async def migrate_when_free(
    db: SqliteDatabase, migrations: list[Migration] | None = None, *, wait_seconds: float = MIGRATION_WAIT_SECONDS
) -> SchemaMove:
    """`migrate` on `db`'s thread, asked again while another klaw process migrating the file (its note says so:
    migration_note.py) holds the write lock past the connection's busy timeout: it finishes, and this one finds
    nothing left to do, as PostgreSQL's advisory lock waits; for `wait_seconds` at most; says once on stderr
    that it waits. Each ask waits the busy timeout on the database thread, so Ctrl-C stops the wait within it
    (decision 451). A lock held by anything else is refused after the busy timeout (decision 460)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    said = False
    while True:
        try:
            return await db.run(lambda connection: migrate(connection, migrations))
        except apsw.BusyError:
            migrating = migrating_process(db.path)
            if migrating is None or loop.time() >= deadline:
                raise
            if not said:
                log.warning(
                    "%s is being moved to a newer schema by another klaw process (pid %d), which takes minutes on"
                    " a large home: waiting for it, up to %d minutes (Ctrl-C stops)",
                    db.path,
                    migrating,
                    round(wait_seconds / 60),
                )
                said = True


def require_current(connection: apsw.Connection) -> None:
    """For a connection that may only read (a full disk, decision 431): a file that needs a migration is
    refused as a write would be (`ReadOnlyError`, which the store words by the disk's trouble)."""
    if pending(bundled_migrations("klaw.store.sqlite"), current_version(connection)):
        raise apsw.ReadOnlyError("klaw.db needs moving to this klaw's schema, which writes to it")
