"""Opening a PostgreSQL store: the DSN from the environment, a psycopg 3 async pool, pgvector's types.

The DSN is read from the variable `database.urlEnv` names (engine.yaml never holds it, and no message
repeats it: it carries a password). Every repository borrows a connection for one call; a call that
writes runs in one transaction (`transaction()`), so the rules SQLite keeps with `with connection:`
hold here too. psycopg's errors become `StorageError`s a person can act on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed

from klaw.cancellation import cancel_requests, deliver_lost_cancellation
from klaw.store.errors import ServerUnreachable
from klaw.store.postgres.dsn_hiding import hide_connection_string
from klaw.store.postgres.dsn_variable import dsn_problem
from klaw.store.protocol import StorageError, StorageUnavailable

Connection = psycopg.AsyncConnection[tuple[Any, ...]]
Row = tuple[Any, ...]
T = TypeVar("T")
log = logging.getLogger(__name__)
ROLLBACK_ATTEMPTS = 4  # a deadlock or serialization failure is tried again this often in all
# a write the server rolled back because it met another (psycopg's classes are not one hierarchy)
ROLLED_BACK = (psycopg.errors.TransactionRollback, psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
# the server ended a transaction this process left idle too long (store.IDLE_IN_TRANSACTION_SECONDS: the
# process stalled inside it, e.g. stopped): nothing of it was stored, and a second try runs afresh
STALLED = psycopg.errors.IdleInTransactionSessionTimeout


def dsn_from_env(variable: str | None) -> str:
    """The DSN held by `variable`; `StorageError` naming the variable (never a value) when it is unset."""
    if (problem := dsn_problem(variable)) is not None:
        raise StorageError(problem)
    assert variable is not None
    return os.environ[variable].strip()


def server_error(variable: str, exc: BaseException) -> StorageError:
    """A psycopg failure as one line that names the variable, never the DSN (it holds the password)."""
    if isinstance(exc, ROLLED_BACK):  # transient
        return StorageUnavailable(
            f"the PostgreSQL server named by {variable} rolled a write back ({_first_line(exc, variable)}):"
            " it conflicted with another write at the same moment; nothing of it was stored, try again"
        )
    if isinstance(exc, STALLED):
        return StorageUnavailable(
            f"the PostgreSQL server named by {variable} ended a transaction this process left idle"
            " (the process stalled inside it, e.g. suspended): nothing of it was stored, try again"
        )
    if isinstance(exc, PoolClosed):  # closed by `stopping` (or a call after the close)
        return StorageUnavailable(
            f"cannot reach the PostgreSQL server named by {variable}, and klaw is closing without waiting for it"
        )
    if isinstance(exc, psycopg.OperationalError):
        unavailable = ServerUnreachable if no_server_answered(exc) else StorageUnavailable
        return unavailable(
            f"cannot reach the PostgreSQL server named by {variable}: {_first_line(exc, variable)}. Check that it is"
            " running and that the connection string (host, port, user, password, database) is right."
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege) and "extension" in str(exc):
        # Refused by its permission check, which comes after the server found the extension's files: pgvector is
        # installed, this user may not create it (newcomer19: told to install what was there).
        return vector_not_creatable(variable, _first_line(exc, variable))
    if isinstance(exc, psycopg.errors.FeatureNotSupported | psycopg.errors.UndefinedFile) or "vector" in str(exc):
        return StorageError(
            f"the PostgreSQL server named by {variable} lacks the pgvector extension ({_first_line(exc, variable)}):"
            " install pgvector 0.8 or newer there (docs/postgres.md), or have an administrator run"
            " CREATE EXTENSION vector in the database"
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        said = _first_line(exc, variable)
        if "for table" in str(exc) or "for sequence" in str(exc):  # klaw's tables are there, not writable
            return StorageError(
                f"the database user of {variable} may not write klaw's tables ({said}): connect as the user that"
                " made them, or grant this one SELECT, INSERT, UPDATE and DELETE on them (docs/postgres.md)"
            )
        # CREATE on the database does not let a user make tables in a schema (PostgreSQL 15 and later: public
        # is not writable by others), which this said before (adversary22)
        return StorageError(
            f"the database user of {variable} may not create klaw's tables ({said}): grant it CREATE on the"
            " schema (GRANT CREATE ON SCHEMA public TO that user) or make it the database's owner (docs/postgres.md)"
        )
    if "connection info string" in str(exc) or "invalid connection option" in str(exc):
        return StorageError(
            f"the value of {variable} is not a PostgreSQL connection string ({_first_line(exc, variable)}):"
            " write it as postgresql://user:password@host:5432/database, special characters of the"
            " password percent-encoded"
        )
    return StorageError(f"PostgreSQL ({variable}): {_first_line(exc, variable)}")


def vector_not_creatable(variable: str, said: str) -> StorageError:
    """pgvector installed on the server, not yet created in the database, by a user who may not create it."""
    return StorageError(
        f"pgvector is installed on the PostgreSQL server named by {variable}, but its database user may not"
        f" create the extension in that database ({said}): have a superuser run CREATE EXTENSION vector there"
        " (its owner may do it only where an administrator marked pgvector trusted), then start klaw again"
        " (docs/postgres.md)"
    )


# What a server that answered says while it cannot take connections yet (or any more): passing, as no answer is.
_NOT_NOW = ("starting up", "shutting down", "not yet accepting connections", "in recovery mode")


def no_server_answered(exc: psycopg.OperationalError) -> bool:
    """True when no server answered the connection (refused, timed out, no socket, a host name not resolved)
    or it answered only that it is starting or stopping: a passing fault (a reboot where klaw starts before its
    database), not a wrong password or database, which the server answered with a FATAL of its own. psycopg
    gives a failed connection no SQLSTATE, so the server's words are what tell them apart (decision 475)."""
    if exc.sqlstate is not None:
        return exc.sqlstate.startswith("57P")  # admin shutdown, crash shutdown, cannot connect now
    said = str(exc)
    return "FATAL:" not in said or any(words in said for words in _NOT_NOW)


def _first_line(exc: BaseException, variable: str) -> str:
    """psycopg's first line, every piece of the DSN in it masked (it repeats what it was given)."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return hide_connection_string(line, os.environ.get(variable, ""))


class PostgresDatabase:
    """A pool of async connections; `connection()` borrows one, `transaction()` one in a transaction."""

    def __init__(self, pool: AsyncConnectionPool[Connection], variable: str) -> None:
        self.pool = pool
        self.variable = variable  # the name of the DSN's environment variable, for messages
        self._stopping = False  # the engine is closing (`stopping`)
        self._probes: set[asyncio.Task[None]] = set()
        self.gave_up = False  # closing, the server could not be reached: the pool was closed at once
        self._gone = asyncio.Event()  # set as it gives up

    def stopping(self) -> None:
        """The engine is closing: if the server cannot be reached (a connection opened now fails, or a call
        fails on the server meanwhile), the pool closes at once, and every call waiting for a connection
        fails, instead of each waiting `waitSeconds` for a server the close will not see back (adversary23:
        120 s; decision 442). Messages already accepted are in the database and answered at the next start."""
        self._stopping = True
        self._check_server()

    def _check_server(self) -> asyncio.Task[None]:
        probe = asyncio.create_task(self._probe(), name="postgres-close-probe")
        self._probes.add(probe)
        probe.add_done_callback(self._probes.discard)
        return probe

    async def _probe(self) -> None:
        try:
            conninfo, kwargs = self.pool.conninfo, self.pool.kwargs  # as klaw made it: a string and a dict
            assert isinstance(conninfo, str)
            assert isinstance(kwargs, dict)
            connection = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
        except psycopg.OperationalError as exc:
            # No server answered (its socket gone, refused, timed out), or it is shutting down (57P): an
            # answer in other words (too many clients, a password) is a server still there.
            if exc.sqlstate is None or exc.sqlstate.startswith("57P"):
                self.gave_up = True
                self._gone.set()  # ends the waits for a connection (`_borrowed_closing`)
                await self.pool.close()
            return
        await connection.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        before = cancel_requests()
        try:
            async with self._borrowed_closing() if self._stopping else self.pool.connection() as connection:
                # The pool's wait for a free connection drops a cancellation that comes as the connection is
                # handed over (Python 3.11's wait_for): the caller was asked to stop, so it stops (decision 428).
                deliver_lost_cancellation(before)
                yield connection
        except (psycopg.OperationalError, STALLED) as exc:
            if self._stopping and not self.gave_up and exc.sqlstate is None:  # a wait or a connection failed
                await asyncio.shield(self._check_server())
            raise server_error(self.variable, exc) from exc

    @asynccontextmanager
    async def _borrowed_closing(self) -> AsyncIterator[Connection]:
        """`pool.connection()` while closing, given up at once when the server is found gone: psycopg_pool
        (3.3.3) fails the calls waiting as it closes, but one whose connection failed its check meanwhile
        queues again in the closed pool and waits its whole timeout."""
        if self.gave_up:
            raise PoolClosed("given up: the server could not be reached")
        getting, gone = asyncio.ensure_future(self.pool.getconn()), asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait([getting, gone], return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled: a connection got meanwhile goes back
            await self._let_go(getting)
            raise
        finally:
            gone.cancel()
        if not getting.done():
            await self._let_go(getting)
            raise PoolClosed("given up: the server could not be reached")
        connection = getting.result()
        try:
            yield connection
        finally:
            await self.pool.putconn(connection)

    async def _let_go(self, getting: asyncio.Future[Connection]) -> None:
        getting.cancel()
        got = (await asyncio.gather(getting, return_exceptions=True))[0]
        if isinstance(got, psycopg.AsyncConnection):
            await self.pool.putconn(got)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        async with self.connection() as connection, connection.transaction():
            yield connection

    async def in_transaction(self, body: Callable[[Connection], Awaitable[T]]) -> T:
        """`body` in a transaction, run again (at most `ROLLBACK_ATTEMPTS` times in all) when the server
        rolls it back for a deadlock or a serialization failure (two writers met, and a second try,
        after the other committed, goes through) or ended it idle (this process stalled inside it: a
        second try finds what happened meanwhile, e.g. its chat's lease taken). Any other failure ends
        it at once."""
        for attempt in range(1, ROLLBACK_ATTEMPTS + 1):
            try:
                async with self.transaction() as connection:
                    return await body(connection)
            except StorageUnavailable as exc:
                if attempt == ROLLBACK_ATTEMPTS or not isinstance(exc.__cause__, (*ROLLED_BACK, STALLED)):
                    raise
                await asyncio.sleep(random.uniform(0.005, 0.05) * attempt)  # apart, so they do not meet again
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one read, on a connection borrowed for it."""
        async with self.connection() as connection:
            return await fetch_all(connection, sql, params)

    async def read_rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """`rows`: every read borrows a connection of its own already, beside the writes (SQLite's
        `read_rows` is what needs a connection apart: decision 216)."""
        return await self.rows(sql, params)

    async def aclose(self) -> None:
        await asyncio.gather(*self._probes, return_exceptions=True)
        await self.pool.close()
        if self.gave_up:
            log.warning(
                "closed without waiting for the PostgreSQL server named by %s, which could not be reached:"
                " every message klaw accepted is stored there (the conversation log is kept in the database),"
                " and those left unanswered are answered at the next start; the replies of the turns cut short"
                " were not stored",
                self.variable,
            )


async def fetch_all(
    connection: Connection, sql: str, params: Sequence[Any] = (), *, prepare: bool | None = None
) -> list[Row]:
    """`prepare=False`: planned for its values each time, never kept prepared (its best plan depends on
    them: a searched word's rows, decision 427)."""
    cursor = await connection.execute(sql, params, prepare=prepare)  # SQL built from constants, values bound
    return [tuple(row) for row in await cursor.fetchall()]


async def fetch_one(
    connection: Connection, sql: str, params: Sequence[Any] = (), *, prepare: bool | None = None
) -> Row | None:
    cursor = await connection.execute(sql, params, prepare=prepare)
    row = await cursor.fetchone()
    return None if row is None else tuple(row)


async def fetch_value(
    connection: Connection, sql: str, params: Sequence[Any] = (), *, prepare: bool | None = None
) -> Any:
    """The first column of the first row, or None when there is no row."""
    row = await fetch_one(connection, sql, params, prepare=prepare)
    return None if row is None else row[0]


async def execute(connection: Connection, sql: str, params: Sequence[Any] = ()) -> int:
    """Run a statement; returns how many rows it changed."""
    cursor = await connection.execute(sql, params)
    return max(cursor.rowcount, 0)


def clean_text(text: str) -> str:
    """PostgreSQL text cannot hold NUL characters: each becomes U+FFFD in the database (the conversation
    log, the source of truth, keeps the text as it came)."""
    return text.replace("\x00", "\ufffd")
