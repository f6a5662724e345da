"""`PostgresRebuild`: `klaw reindex` on PostgreSQL, built in a schema of its own and swapped in.

The log is the database's `log_records` (docs/decisions/132-log-with-several-engines.md), read by UTC
day in append order (`PostgresKeptLog`). The new store is built beside the live tables in the schema
`klaw_reindex` (the same migrations, found first on the build's `search_path`; pgvector's type stays
where the extension is), with the same resume journal as SQLite's build. The swap is one transaction:
klaw's live tables and functions move to `klaw_backup`, the build's into the live schema, so engines
see the old store or the new one, never a mix; the backup is dropped unless kept (then renamed
`klaw_backup_<UTC time>`, which no later run drops: decision 395). Only klaw's own
objects move (those the build created): anything else in the schema is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

from klaw.store.postgres.connection import execute, server_error
from klaw.store.postgres.rebuild import PostgresRebuildJournal
from klaw.store.postgres.store import PostgresStore
from klaw.store.protocol import StorageError
from klaw.store.rebuild_protocol import KeptLogDay, KeptLogRow
from klaw.store.records import ChatRef

BUILD_SCHEMA = "klaw_reindex"
BACKUP_SCHEMA = "klaw_backup"
_DAY = "to_char(to_timestamp(created_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


class _Server:
    """Short blocking connections to the database `variable` names (errors name it, never the DSN)."""

    def __init__(self, dsn: str, variable: str) -> None:
        self.dsn = dsn
        self.variable = variable

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        try:
            return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise server_error(self.variable, exc) from exc


class PostgresKeptLog:
    def __init__(self, server: _Server) -> None:
        self._server = server

    def days(self) -> list[KeptLogDay]:
        with self._server.connect() as connection:
            rows = connection.execute(
                f"SELECT {_DAY} AS day, count(*), max(seq) FROM log_records GROUP BY day ORDER BY day"
            ).fetchall()
        return [KeptLogDay(str(day), int(lines), int(last)) for day, lines, last in rows]  # type: ignore[call-overload]

    def rows(self, day: str) -> list[KeptLogRow]:
        with self._server.connect() as connection:
            rows = connection.execute(
                "SELECT l.seq, c.channel, c.chat_id, l.line FROM log_records l JOIN chats c ON c.id = l.chat"
                " WHERE l.created_at >= %s AND l.created_at < %s ORDER BY l.seq",
                _bounds(day),
            ).fetchall()
        return [
            KeptLogRow(int(str(seq)), ChatRef(str(channel), str(chat_id)), str(line))
            for seq, channel, chat_id, line in rows
        ]


def _bounds(day: str) -> tuple[int, int]:
    """The day's first and first-after milliseconds (UTC), as records' `created_at`."""
    start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    try:
        end = int((start + timedelta(days=1)).timestamp() * 1000)
    except OverflowError:  # 9999-12-31, a record dated by hand: its day has no next (decision 500)
        end = _NO_LATER
    return int(start.timestamp() * 1000), end


_NO_LATER = 2**63 - 1  # PostgreSQL's largest bigint: after any created_at


@dataclass(frozen=True)
class PostgresReindexBuild:
    store: PostgresStore
    journal: PostgresRebuildJournal
    live_schema: str

    async def copy_settings(self) -> int:
        """The live store's settings into the build; of the replies the log says wait for delivery, only
        those the live store still waits for (by record id), as SQLite's rebuild keeps them; and
        `message_send`'s places of the last hour."""
        live = sql.Identifier(self.live_schema)
        async with self.store.db.transaction() as connection:
            await execute(connection, "DELETE FROM settings")
            copied = await execute(
                connection,
                sql.SQL("INSERT INTO settings (key, value, updated_at) SELECT key, value, updated_at FROM {}.settings")
                .format(live)
                .as_string(connection),
            )
            await execute(
                connection,
                sql.SQL(
                    "DELETE FROM undelivered_replies b WHERE NOT EXISTS (SELECT 1 FROM {live}.undelivered_replies u"
                    " JOIN {live}.messages m ON m.rowid = u.message_rowid JOIN messages n ON n.id = m.id"
                    " WHERE n.rowid = b.message_rowid)"
                )
                .format(live=live)
                .as_string(connection),
            )
            await execute(connection, "DELETE FROM sends")
            await execute(  # message_send's places of the last hour (decision 418): the log has no sends
                connection,
                sql.SQL("INSERT INTO sends (target, sent_at) SELECT target, sent_at FROM {}.sends")
                .format(live)
                .as_string(connection),
            )
        return copied

    async def finish(self) -> None:
        """Nothing to fold: the build's tables are whole."""

    async def aclose(self) -> None:
        await self.store.aclose()


class PostgresRebuild:
    """`klaw reindex`'s build for the PostgreSQL database `variable` names (`RebuildBackend`)."""

    def __init__(self, dsn: str, variable: str) -> None:
        self._server = _Server(dsn, variable)

    @property
    def location(self) -> Path:
        return Path(f"schema {BUILD_SCHEMA} of the PostgreSQL database named by {self._server.variable}")

    def kept_log(self) -> PostgresKeptLog:
        return PostgresKeptLog(self._server)

    def exists(self) -> bool:
        with self._server.connect() as connection:
            row = connection.execute("SELECT to_regnamespace(%s) IS NOT NULL", (BUILD_SCHEMA,)).fetchone()
        return bool(row and row[0])

    async def open(self, clock: Callable[[], datetime], *, resume: bool) -> PostgresReindexBuild | None:
        with self._server.connect() as connection:
            row = connection.execute("SELECT current_schema(), current_schemas(false)").fetchone()
            if row is None or row[0] is None:
                raise StorageError(f"the database named by {self._server.variable} has no schema to rebuild")
            live, path = str(row[0]), [str(name) for name in row[1]]  # type: ignore[attr-defined]
            connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(BUILD_SCHEMA)))
        try:
            store = await PostgresStore.open(
                self._server.dsn,
                variable=self._server.variable,
                clock=clock,
                search_path=[BUILD_SCHEMA, *path],
                moving=True,
            )
        except StorageError:
            if resume:
                return None
            raise
        return PostgresReindexBuild(store, PostgresRebuildJournal(store), live)

    def discard(self) -> None:
        with self._server.connect() as connection:
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(BUILD_SCHEMA)))

    def swap_into_place(self, *, keep_backup: bool) -> Path | None:
        try:
            with self._server.connect() as connection, connection.transaction():
                _swap(connection)
                backup = sql.Identifier(BACKUP_SCHEMA)
                if not keep_backup:
                    connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(backup))
                    return None
                # a name of its own, so the next run's swap (which reuses klaw_backup) never drops it
                kept = f"{BACKUP_SCHEMA}_{datetime.now(UTC):%Y%m%d_%H%M%S_%f}"
                connection.execute(sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(backup, sql.Identifier(kept)))
        except psycopg.Error as exc:
            raise server_error(self._server.variable, exc) from exc
        return Path(
            f"schema {kept} of the PostgreSQL database named by {self._server.variable}"
            f" (DROP SCHEMA {kept} CASCADE removes it)"
        )


def _swap(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """klaw's live objects to the backup schema, the build's into the live schema, in the caller's
    transaction; the build schema, then empty, is dropped."""
    live = connection.execute("SELECT current_schema()").fetchone()
    assert live is not None
    schemas = {"live": sql.Identifier(str(live[0])), "build": sql.Identifier(BUILD_SCHEMA)}
    backup = sql.Identifier(BACKUP_SCHEMA)
    connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(backup))
    connection.execute(sql.SQL("CREATE SCHEMA {}").format(backup))
    tables = connection.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = to_regnamespace(%s) AND relkind IN ('r', 'p')"
        " ORDER BY relname",
        (BUILD_SCHEMA,),
    ).fetchall()
    functions = connection.execute(
        "SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc"
        " WHERE pronamespace = to_regnamespace(%s) ORDER BY proname",
        (BUILD_SCHEMA,),
    ).fetchall()
    for (table,) in tables:
        name = sql.Identifier(str(table))
        connection.execute(
            sql.SQL("ALTER TABLE IF EXISTS {live}.{name} SET SCHEMA {backup}").format(
                name=name, backup=backup, **schemas
            )
        )
        connection.execute(sql.SQL("ALTER TABLE {build}.{name} SET SCHEMA {live}").format(name=name, **schemas))
    live_functions = set(
        connection.execute(
            "SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc"
            " WHERE pronamespace = %s::regnamespace",
            (str(live[0]),),
        ).fetchall()
    )
    for function, arguments in functions:
        signature = sql.SQL("{}({})").format(sql.Identifier(str(function)), sql.SQL(str(arguments)))
        if (function, arguments) in live_functions:
            connection.execute(
                sql.SQL("ALTER FUNCTION {live}.{signature} SET SCHEMA {backup}").format(
                    signature=signature, backup=backup, **schemas
                )
            )
        connection.execute(
            sql.SQL("ALTER FUNCTION {build}.{signature} SET SCHEMA {live}").format(signature=signature, **schemas)
        )
    connection.execute(sql.SQL("DROP SCHEMA {}").format(schemas["build"]))
