"""Two processes opening a store an older klaw left, at the same moment (an engine starting while
`klaw db info` runs; two engines on one PostgreSQL database): the schema is moved forward once, neither
fails, and only the one that moved it says so (stop 45's open end: both read the version before taking
the migration lock, so both logged "migrated"; on SQLite the second then ran the same migration again
and failed with "table … already exists"). A slow migration holds the first one's lock while the
second asks. On SQLite the second waits for the first however long its migration takes (decision 451: under
load this one took longer than the 5 s busy timeout, and the second failed "in use by another klaw process",
as an opening beside an engine moving a large home forward on a small machine would have); a lock held by
anything but a migration is not waited for (decision 460)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

import apsw
import psycopg
import pytest

from klaw.store.postgres import migrations as pg
from klaw.store.shared.migrations import Migration, SchemaMove
from klaw.store.sqlite import migrations as lite
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.migration_note import note_path, noting_migration
from tests.pg_server import PgServer

_SLOW_SQLITE = (
    "CREATE TABLE slow AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1500000) SELECT x FROM c"
)
_SQLITE = [
    Migration(1, "0001_first.sql", "CREATE TABLE first (x)"),
    Migration(2, "0002_slow.sql", _SLOW_SQLITE),
    Migration(3, "0003_last.sql", "CREATE TABLE last (x)"),
]
_QUICK = [_SQLITE[0], Migration(2, "0002_quick.sql", "CREATE TABLE quick (x)")]
_POSTGRES = [
    Migration(1, "0001_first.sql", "CREATE TABLE first (x integer)"),
    Migration(2, "0002_slow.sql", "SELECT pg_sleep(0.5); CREATE TABLE slow (x integer);"),
    Migration(3, "0003_last.sql", "CREATE TABLE last (x integer)"),
]
_names = itertools.count()


async def test_two_openings_of_an_old_klaw_db_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    first, second = await SqliteDatabase.open(path), await SqliteDatabase.open(path)
    try:
        await first.run(lambda connection: lite.migrate(connection, _SQLITE[:1]))  # an older klaw's file

        moves = await asyncio.gather(*(lite.migrate_when_free(db, _SQLITE) for db in (first, second)))

        assert sorted((move.before, move.after) for move in moves) == [(1, 3), (3, 3)]
        applied = await first.run(lambda connection: list(connection.execute("SELECT version FROM schema_version")))
        assert [row[0] for row in applied] == [1, 2, 3]
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_opening_waits_out_a_migration_held_past_the_busy_timeout_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another klaw migrating klaw.db holds its write lock longer than the opening's busy timeout (here 50 ms,
    not 5 s): the opening waits, says once that it does, and migrates when the lock is given back."""
    path = tmp_path / "klaw.db"
    db = await SqliteDatabase.open(path)
    holder = apsw.Connection(str(path))
    try:
        await db.run(lambda connection: lite.migrate(connection, _SQLITE[:1]))
        await db.run(lambda connection: connection.setbusytimeout(50))
        holder.execute("BEGIN IMMEDIATE")
        with caplog.at_level(logging.WARNING, logger=lite.__name__), noting_migration(holder.filename):
            moving = asyncio.create_task(lite.migrate_when_free(db, _QUICK))
            async with asyncio.timeout(60):
                while not caplog.records:  # noqa: ASYNC110 - the line said is all there is to see
                    await asyncio.sleep(0.01)
            assert not moving.done()
            holder.execute("COMMIT")
            assert await moving == SchemaMove(1, 2)
        said = [record.getMessage() for record in caplog.records]
        assert len(said) == 1 and "is being moved to a newer schema by another klaw process" in said[0], said
        assert "waiting for it" in said[0], said
        assert not note_path(path).exists()
    finally:
        holder.close()
        await db.aclose()


async def test_a_lock_held_by_something_other_than_a_migration_is_not_waited_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Decision 451's wait of up to 10 minutes was for any holder of the write lock: a `sqlite3` shell left in a
    transaction delayed every opening that long. Now only a migration's (its note) is waited for; anything else
    is refused after the busy timeout (decision 460). A migration killed before it removed its note (its process
    gone) counts for nothing."""
    path = tmp_path / "klaw.db"
    db = await SqliteDatabase.open(path)
    holder = apsw.Connection(str(path))
    try:
        await db.run(lambda connection: lite.migrate(connection, _SQLITE[:1]))
        await db.run(lambda connection: connection.setbusytimeout(50))
        holder.execute("BEGIN IMMEDIATE")
        with caplog.at_level(logging.WARNING, logger=lite.__name__):
            async with asyncio.timeout(60):  # the old code waited 600 s here
                with pytest.raises(apsw.BusyError):
                    await lite.migrate_when_free(db, _QUICK)
                note_path(path).write_text("999999999")  # a pid no process has
                with pytest.raises(apsw.BusyError):
                    await lite.migrate_when_free(db, _QUICK)
        assert not caplog.records, [record.getMessage() for record in caplog.records]
        holder.execute("COMMIT")
        assert await lite.migrate_when_free(db, _QUICK) == SchemaMove(1, 2)
    finally:
        holder.close()
        await db.aclose()


async def test_two_engines_opening_an_old_postgresql_database_say_it_migrated_once(postgres_server: PgServer) -> None:
    name = f"klaw_test_at_once_{next(_names)}"
    postgres_server.admin(f"CREATE DATABASE {name}")
    try:
        dsn = postgres_server.dsn(name)
        connections = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(2)]
        try:
            await pg.migrate(connections[0], _POSTGRES[:1])

            moves = await asyncio.gather(*(pg.migrate(connection, _POSTGRES) for connection in connections))

            assert sorted((move.before, move.after) for move in moves) == [(1, 3), (3, 3)]
        finally:
            for connection in connections:
                await connection.close()
    finally:
        postgres_server.admin(f"DROP DATABASE {name} WITH (FORCE)")
