"""`PostgresMigration`: `klaw db migrate --to postgres`, moving a home into PostgreSQL through `klaw reindex`.

The log is the source of truth, so a home moves by being rebuilt from it into the PostgreSQL database
(the same replay, folds and embedding as `klaw reindex`; `store/rebuild_protocol.py`): the target is the
database itself, there is nothing to swap. Its journal (`reindex_*` tables, as SQLite's) lets an
interrupted move resume; the runtime settings are copied from klaw.db when there is one. A database that
already holds klaw's messages without a journal (a finished move, or a live PostgreSQL home) is refused:
moving twice would mix two homes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg

from klaw.store.postgres.connection import execute, fetch_all, fetch_one, server_error
from klaw.store.postgres.path_checks import JOURNAL, JOURNAL_FOUND
from klaw.store.postgres.store import PostgresStore
from klaw.store.protocol import StorageError
from klaw.store.rebuild_protocol import DoneFile, TargetRefused

_JOURNAL = (
    "CREATE TABLE IF NOT EXISTS reindex_files (key text PRIMARY KEY, size bigint NOT NULL, mtime_ns bigint NOT NULL,"
    " lines bigint NOT NULL);"
    " CREATE TABLE IF NOT EXISTS reindex_skipped (key text NOT NULL, line bigint NOT NULL, reason text NOT NULL,"
    " PRIMARY KEY (key, line));"
    " CREATE TABLE IF NOT EXISTS reindex_state (key text PRIMARY KEY, value text NOT NULL)"
)
# Every table klaw's migrations create, emptied by `discard` (a move started over).
_TABLES = (
    "message_vectors, memory_vectors, summary_vectors, summary_records, summaries, memory_chunks, embedding_jobs,"
    " sessions, exchanges, messages, segments, chats, settings, index_meta"
)


class PostgresRebuildJournal:
    def __init__(self, store: PostgresStore) -> None:
        self._db = store.db

    async def create(self) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(_JOURNAL.encode())

    async def get(self, key: str) -> str | None:
        async with self._db.connection() as connection:
            row = await fetch_one(connection, "SELECT value FROM reindex_state WHERE key = %s", (key,))
        return None if row is None else str(row[0])

    async def set(self, key: str, value: str) -> None:
        async with self._db.transaction() as connection:
            await execute(
                connection,
                "INSERT INTO reindex_state (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value",
                (key, value),
            )

    async def done_files(self) -> dict[str, DoneFile]:
        async with self._db.connection() as connection:
            rows = await fetch_all(connection, "SELECT key, size, mtime_ns, lines FROM reindex_files")
        return {str(r[0]): DoneFile(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows}

    async def mark_done(self, files: Sequence[DoneFile], skipped: Sequence[tuple[str, int, str]]) -> None:
        async with self._db.transaction() as connection:
            for done in files:
                await execute(connection, "DELETE FROM reindex_skipped WHERE key = %s", (done.key,))
                await execute(
                    connection,
                    "INSERT INTO reindex_files (key, size, mtime_ns, lines) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,"
                    " lines = excluded.lines",
                    (done.key, done.size, done.mtime_ns, done.lines),
                )
            for key, line, reason in skipped:
                await execute(
                    connection,
                    "INSERT INTO reindex_skipped (key, line, reason) VALUES (%s, %s, %s) ON CONFLICT (key, line)"
                    " DO UPDATE SET reason = excluded.reason",
                    (key, line, reason),
                )

    async def skipped(self) -> list[tuple[str, int, str]]:
        async with self._db.connection() as connection:
            rows = await fetch_all(connection, "SELECT key, line, reason FROM reindex_skipped ORDER BY key, line")
        return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]

    async def drop(self) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                b"DROP TABLE IF EXISTS reindex_files; DROP TABLE IF EXISTS reindex_skipped;"
                b" DROP TABLE IF EXISTS reindex_state"
            )


@dataclass(frozen=True)
class PostgresBuild:
    store: PostgresStore
    journal: PostgresRebuildJournal
    sqlite_file: Path

    async def copy_settings(self) -> int:
        """klaw.db's runtime settings into the database (0 without klaw.db), with what else klaw.db holds
        that the log does not say: which replies still wait for delivery (folding the log marked every
        reply ever closed; only those klaw.db still waits for are kept, as `klaw reindex` keeps them, so
        the first start sends no old reply again) and the places `message_send` took in the last hour."""
        try:
            kept = _read_sqlite(self.sqlite_file)
        except StorageError:
            async with self.store.db.transaction() as connection:  # no reply is sent again for it (the fold's)
                await execute(connection, "DELETE FROM undelivered_replies")
            raise
        async with self.store.db.transaction() as connection:
            await execute(connection, "DELETE FROM settings")
            for key, value, updated_at in kept.settings:
                json.loads(value)  # only JSON values are settings
                await execute(
                    connection,
                    "INSERT INTO settings (key, value, updated_at) VALUES (%s, %s, %s)",
                    (key, value, updated_at),
                )
            await execute(
                connection,
                "DELETE FROM undelivered_replies u WHERE NOT EXISTS (SELECT 1 FROM messages m"
                " WHERE m.rowid = u.message_rowid AND m.id = ANY(%s))",
                (list(kept.waiting),),
            )
            await execute(connection, "DELETE FROM sends")
            for target, sent_at in kept.sends:
                await execute(connection, "INSERT INTO sends (target, sent_at) VALUES (%s, %s)", (target, sent_at))
        return len(kept.settings)

    async def finish(self) -> None:
        """Nothing to fold or move: the database is already where it will be used."""

    async def aclose(self) -> None:
        await self.store.aclose()


@dataclass(frozen=True)
class _KeptState:
    """What klaw.db holds that its log does not: settings rows, the record ids of the replies waiting for
    delivery, and `sends` rows (target, sent_at)."""

    settings: list[tuple[str, str, int]]
    waiting: list[str]
    sends: list[tuple[str, int]]


def _read_sqlite(sqlite_file: Path) -> _KeptState:
    """klaw.db's state the log does not hold; none without klaw.db (or in one older than a table): sending
    every reply the log ever held again would be worse than losing one waiting at the moment of the move."""
    if not sqlite_file.exists():
        return _KeptState([], [], [])
    import apsw  # the source is SQLite's file, read directly: its store would migrate it

    try:
        source = apsw.Connection(f"file:{sqlite_file}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            tables = {str(row[0]) for row in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            settings = (
                [(str(k), str(v), int(t)) for k, v, t in source.execute("SELECT key, value, updated_at FROM settings")]
                if "settings" in tables
                else []
            )
            waiting = (
                [
                    str(row[0])
                    for row in source.execute(
                        "SELECT m.id FROM undelivered_replies u JOIN messages m ON m.rowid = u.message_rowid"
                    )
                ]
                if "undelivered_replies" in tables
                else []
            )
            sends = (
                [(str(target), int(at)) for target, at in source.execute("SELECT target, sent_at FROM sends")]
                if "sends" in tables
                else []
            )
        finally:
            source.close()
    except apsw.Error as exc:
        raise StorageError(
            f"cannot read what {sqlite_file} holds beside the log (runtime settings, replies still waiting, the"
            f" hour's sends) to carry it along: {exc}. `klaw db info` says what is wrong with it; mend it, or move"
            " it aside (those are then lost; the memory comes from the log), and run the move again"
        ) from exc
    return _KeptState(settings, waiting, sends)


class PostgresMigration:
    """The PostgreSQL database named by `variable` as the build `klaw reindex` fills (`RebuildBackend`)."""

    def __init__(self, dsn: str, variable: str, sqlite_file: Path) -> None:
        self._dsn = dsn
        self._variable = variable
        self._sqlite_file = sqlite_file

    @property
    def location(self) -> Path:
        return Path(f"the PostgreSQL database named by {self._variable}")

    def exists(self) -> bool:
        """Whether a move was started there (its journal); refuses a database that already holds a home."""
        try:
            with psycopg.connect(self._dsn, autocommit=True, connect_timeout=10) as connection:
                journal = connection.execute(JOURNAL_FOUND.encode()).fetchone()
                foreign = connection.execute(
                    "SELECT to_regclass(format('%I.reindex_state', current_schema())) IS NOT NULL"
                ).fetchone()
                has_messages = connection.execute("SELECT to_regclass('messages') IS NOT NULL").fetchone()
                held = 0
                if has_messages and has_messages[0]:
                    row = connection.execute("SELECT count(*) FROM messages").fetchone()
                    held = int(row[0]) if row else 0
        except psycopg.Error as exc:
            raise server_error(self._variable, exc) from exc
        started = bool(journal and journal[0] == JOURNAL)
        if held and not started:
            raise TargetRefused(
                f"the PostgreSQL database named by {self._variable} already holds {held} klaw messages: it is"
                " a home already (moved before, or in use). Move into an empty database; this one is left"
                " as it is"
            )
        if not started and foreign and foreign[0]:  # a table of that name, not klaw's journal (decision 450)
            raise TargetRefused(
                f"the PostgreSQL database named by {self._variable} has a table reindex_state that is not klaw's:"
                " the move keeps its journal under that name. Rename or drop that table, or move into another"
                " database; this one is left as it is"
            )
        return started

    async def open(self, clock: Callable[[], datetime], *, resume: bool) -> PostgresBuild | None:
        try:
            store = await PostgresStore.open(self._dsn, variable=self._variable, clock=clock, moving=True)
        except StorageError:
            if resume:
                return None
            raise
        return PostgresBuild(store, PostgresRebuildJournal(store), self._sqlite_file)

    def kept_log(self) -> None:
        """The log is the home's JSONL files."""
        return None

    def discard(self) -> None:
        """Empty what an unfinished move wrote, to start over."""
        try:
            with psycopg.connect(self._dsn, autocommit=True, connect_timeout=10) as connection:
                connection.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY CASCADE".encode())
                connection.execute(b"UPDATE id_marks SET high = 0")
                connection.execute(
                    b"DROP TABLE IF EXISTS reindex_files; DROP TABLE IF EXISTS reindex_skipped;"
                    b" DROP TABLE IF EXISTS reindex_state"
                )
        except psycopg.Error as exc:
            raise server_error(self._variable, exc) from exc

    def swap_into_place(self, *, keep_backup: bool) -> Path | None:
        """Nothing to swap (klaw.db stays where it was, untouched: the backup is the file itself)."""
        del keep_backup
        return None
