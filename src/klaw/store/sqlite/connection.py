"""Opening klaw.db: apsw (which can always load extensions, unlike many Pythons' sqlite3 module),
sqlite-vec loaded, WAL, and a single worker thread that owns the connection.

SQLite serialises writers anyway, so one thread per connection costs nothing in throughput and
keeps every blocking call off the event loop without locking. Callers `await db.run(fn)` with a
function that receives the apsw connection. Reads that must not wait behind the writes queued there
`await db.read(fn)` instead: a read-only connection of `read_pool.py` (decision 216).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import apsw

from klaw.disk_trouble import disk_trouble, full_words
from klaw.private_files import create_private
from klaw.store.protocol import StorageError
from klaw.store.sqlite.last_messages import register_scoring
from klaw.store.sqlite.query import Row, fetch_all
from klaw.store.sqlite.read_pool import ReadPool
from klaw.store.sqlite.thread_worker import ThreadWorker, deliver
from klaw.store.sqlite.write_queue import WriteQueue, WriterConnection

log = logging.getLogger(__name__)
T = TypeVar("T")

# A write that must be durable before a transaction (the log lines of the rows it stores: decision 211)
# runs on one of these threads, several side by side (concurrent fsyncs are committed together by the
# file system, and a busy database thread does not wait for a disk flush), and hands the transaction to
# the database thread itself: the event loop is woken once, when both are done, not once for each.
# When the database thread has nothing queued or running, it writes the line itself, then the rows: one
# thread woken instead of two (decision 519).
_FIRST_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="klaw-log-first")

# Prepared statements apsw keeps per connection, its largest. apsw's cache makes room by taking slots
# in turn, whether or not a statement is still in use, so with its default of 100 a statement the
# engine runs once a turn or less (a turn runs ~70 on the writer's connection, ~30 on each reader's)
# was prepared again most turns: 6.5 of the writer's a turn, ~1 of each reader's. With 512, 0.24 on
# the writer (statements with a list of marks of varying length). The cache holds only the distinct
# statements a connection ran (~150), so the larger size costs no memory by itself (decision 263).
STATEMENT_CACHE = 512

# WAL frames the writer lets pile up before it checkpoints them into klaw.db (SQLite's default: 1,000).
# A turn writes ~90 frames in ~7 commits, mostly the same few pages again (the right edges of `messages`,
# its indexes and FTS5's tables, `segments`, `embedding_jobs`); a checkpoint copies each distinct page
# once, so the fewer checkpoints, the fewer copies. At 1,000 a checkpoint came every ~11 turns and cost the
# database thread ~0.2 ms of CPU a turn and ~1.7 ms of its time (fsyncs); at 4,000, ~0.1 ms and ~0.8 ms
# (decision 483). 4,000 keeps the WAL inside the wal-index's first hash table (4,062 frames), so a read's
# page look-up does not grow, and `klaw.db-wal` near 16 MB in steady use. What a kill -9 keeps is the
# log's (decision 211) and each commit's, neither of which depends on when frames move into klaw.db.
WAL_AUTOCHECKPOINT = 4000


def _first_then(first: Callable[[], object], fn: Callable[[apsw.Connection], T]) -> Callable[[apsw.Connection], T]:
    """`first()`, then `fn(connection)` only if it returned: `run_after`'s chain as one database-thread call."""

    def both(connection: apsw.Connection) -> T:
        first()
        return fn(connection)

    return both


class SqliteDatabase:
    """An apsw connection confined to one worker thread."""

    def __init__(self, connection: apsw.Connection, worker: ThreadWorker, path: Path, *, reading: bool = False) -> None:
        self._connection = connection
        self._worker = worker
        self.path = path
        self._closed = False
        self.reading = reading
        self._queue = WriteQueue(worker, connection)  # in order; writes side by side commit together
        self._reads = ReadPool(path, lambda at: open_connection(at, create=False))
        if reading:  # one connection holds the file alone: reads run on the database thread
            self._reads.close()

    @classmethod
    async def open(cls, path: Path, *, reading: bool = False) -> SqliteDatabase:
        """`reading`: for a command that only reads, on a disk that refused the usual open (`_connect`)."""
        worker = ThreadWorker("klaw-sqlite")  # the database thread (thread_worker.py, decision 491)
        try:
            connection = await worker.call(_connect, path, reading)
        except BaseException:
            worker.shutdown()  # its one thread is idle: joined at once, no thread left behind
            raise
        return cls(connection, worker, path, reading=reading)

    @property
    def closed(self) -> bool:
        return self._closed

    async def run(self, fn: Callable[[apsw.Connection], T], *, grouped: bool = False, behind: bool = False) -> T:
        """`fn(connection)` on the database thread, after everything of its line queued there before it.
        `grouped`: a write in a `with connection:` block of its own, which may commit in one transaction
        with the grouped writes queued right beside it (write_queue.py, decision 353). `behind`:
        background work no turn waits for, run when no other call waits (decision 382)."""
        if self._closed:
            raise StorageError(f"the database {self.path} is closed")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._queue.submit(fn, loop, done, grouped=grouped, behind=behind)
        return await done

    def after_rollback(self, callback: Callable[[], None]) -> None:
        """`callback()` on the database thread when a group of writes is rolled back to run each alone."""
        self._queue.after_rollback(callback)

    async def run_after(
        self, first: Callable[[], object], fn: Callable[[apsw.Connection], T], *, grouped: bool = False
    ) -> T:
        """`first()` on a thread of its own, then, only if it returned, `run(fn)`: one hop for the
        event loop. An error of `first` is raised and `fn` never runs. Once `first` returned, `fn` runs
        even if the awaiter was cancelled meanwhile: the row follows its log line (decision 211). An idle
        database thread runs both, `fn` in a transaction of its own (decision 519): a turn's accept, its
        exchange's opening and its reply wake one thread less, and what is durable when is unchanged."""
        if self._closed:
            raise StorageError(f"the database {self.path} is closed")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        if self._queue.idle:
            self._queue.submit(_first_then(first, fn), loop, done, always=True)
            return await done

        def chain() -> None:
            try:
                first()
                self._queue.submit(fn, loop, done, grouped=grouped, always=True)
            except BaseException as exc:
                deliver(loop, done, None, exc)

        _FIRST_THREADS.submit(chain)
        return await done

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one read, on the database thread."""
        return await self.run(lambda connection: fetch_all(connection, sql, params))

    async def read(self, fn: Callable[[apsw.Connection], T], key: Hashable = None) -> T:
        """`fn` on a read-only connection of its own, beside the database thread's writes: it sees
        what was committed when it starts (every write its caller awaited). Only for reads that keep
        nothing the writer's connection tracks (the read caches of decisions 196 and 197 stay there).
        `key` (e.g. the chat) tells reads of one kind apart by their cost: a small one runs on the
        event loop when the engine is alone (read_pool.py, decision 533)."""
        if self._closed:
            raise StorageError(f"the database {self.path} is closed")
        if self._reads.closed:  # `close_reads`: the file is leaving WAL mode
            return await self.run(fn)
        return await self._reads.read(fn, key)

    def set_one_turn(self, signal: Callable[[], bool]) -> None:
        """The engine's answer to "at most one turn in flight?" (a few lengths added, asked on the event loop:
        decision 533); until it is set, never."""
        self._reads.one_turn = signal

    @property
    def alone(self) -> bool:
        """At most one turn in flight in the engine and no read on the read threads: work done on the event
        loop now holds up that turn alone, and both read threads are free (decision 533). On the loop."""
        return self._reads.alone

    @property
    def inline_reads(self) -> int:
        """Reads run on the event loop so far (decision 533): for tests and probes."""
        return self._reads.inline_reads

    async def close_reads(self) -> None:
        """Close the read connections (after the reads under way), and read on the database thread
        from now on: what leaving WAL mode needs (no other connection open), e.g. `klaw reindex`
        making its build self-contained."""
        self._reads.closing()
        await self._worker.call(self._reads.close)

    async def read_rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one read, on a read connection (`read`)."""
        return await self.read(lambda connection: fetch_all(connection, sql, params), sql)  # a kind a statement

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True  # no read starts now; those under way finish before their connections close
        self._reads.closing()
        await self._worker.call(self._reads.close)
        close = apsw.Connection.close if self.reading else _checkpoint_and_close  # a reader has nothing to optimize
        await self._worker.call(close, self._connection)
        self._worker.shutdown()


def database_error(path: Path, exc: apsw.Error) -> StorageError:
    """What an SQLite failure while opening or migrating `path` means for the person, in one line: a file
    that is not a database or is damaged (rebuilt from the log by `klaw reindex`), or one another klaw
    process holds (a second engine losing the start race, a reindex swapping it in)."""
    if isinstance(exc, (apsw.NotADBError, apsw.CorruptError)):
        return StorageError(
            f"{path} is not a klaw database or is damaged ({exc}). The conversation log holds everything it"
            f" had: move the file aside (mv {path} {path}.damaged) and run 'klaw reindex' to rebuild it."
        )
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return StorageError(
            f"{path} is in use by another klaw process (an engine starting or running on this home, a command"
            " moving it to a newer klaw's schema, which takes minutes on a large home, or klaw reindex); stop it"
            " or wait for it, then try again."
        )
    disk = disk_trouble(path) if isinstance(exc, (apsw.CantOpenError, apsw.ReadOnlyError, apsw.IOError)) else None
    if isinstance(exc, apsw.FullError):
        disk = full_words(path)
    return StorageError(disk or f"cannot open the database {path}: {exc}")


def _connect(path: Path, reading: bool = False) -> apsw.Connection:
    """The database thread's connection. `reading`: a command that only reads, on a full disk (decision
    431): WAL's index of the -wal file is a 32 KiB -shm file SQLite sizes by writing to it, and with no
    byte free even a read failed ("disk I/O error"). In exclusive locking mode, set before the file is
    first read, SQLite keeps that index in this process's memory and writes no -shm; `query_only` holds
    the command to reading. The file is then this connection's alone until it closes (another process
    opening it waits, then is told it is in use), so only a command that failed the usual way opens so."""
    if not reading:
        create_private(path)  # 0600 before SQLite creates it 0644 & ~umask: its -wal and -shm follow its mode
    connection = open_connection(path, create=not reading, kind=WriterConnection, exclusive=reading)
    try:
        if not reading:  # the file's own mode is read as it is
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("PRAGMA foreign_keys = ON")
        # Freed and moved-away content is overwritten with zeros, so text erased by `/forget` leaves no
        # copy in free space or in the unused part of a page reused later (measured: no cost to ingestion).
        connection.execute("PRAGMA secure_delete = ON")
    except apsw.Error as exc:
        connection.close()
        raise database_error(path, exc) from exc
    return connection


def open_connection(
    path: Path, *, create: bool = True, kind: type[apsw.Connection] = apsw.Connection, exclusive: bool = False
) -> apsw.Connection:
    """A connection to `path` with sqlite-vec loaded and a busy timeout: the writer's, then its pragmas;
    or a reader's (`read_pool.py`, `create=False`: a file gone is an error, never a new empty one).
    `exclusive`: read-only and in exclusive locking mode, WAL's index in memory (`_connect`)."""
    try:
        extension = _vec0_path()  # here, not at import time: a missing package is this one clear error, not a crash
    except ImportError as exc:
        raise StorageError(
            f"sqlite-vec is not installed ({exc}); klaw keeps its vectors in it. Install it with"
            " 'pip install sqlite-vec' in klaw's environment (scripts/setup-venv.sh does)."
        ) from exc
    try:
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        connection = kind(str(path), flags=flags, statementcachesize=STATEMENT_CACHE)
    except apsw.Error as exc:
        raise database_error(path, exc) from exc
    connection.setbusytimeout(5000)
    # Plans that do not depend on bound values, so no statement is prepared again for new ones. FTS5
    # finds each word of a MATCH in each segment of its index with a statement of its own (`... WHERE
    # segid=? AND term<=? ...`) that SQLite (built with STAT4) prepared again for a new term, on about
    # three runs in ten: 10 % of a full-text search's CPU at 100k messages, 38 % at 1k (decision 439).
    connection.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
    if exclusive:  # before anything reads the file (register_scoring below does)
        connection.execute("PRAGMA locking_mode = EXCLUSIVE")
        connection.execute("PRAGMA query_only = ON")
    try:
        connection.enable_load_extension(True)
        connection.load_extension(extension)
        connection.enable_load_extension(False)
    except apsw.Error as exc:
        connection.close()
        raise StorageError(
            f"cannot load sqlite-vec into SQLite: {exc}. Reinstall it with 'pip install --force-reinstall sqlite-vec'."
        ) from exc
    try:
        register_scoring(connection)  # bm25 of the open segments' last messages (last_messages.py)
    except apsw.Error as exc:
        # apsw fetches FTS5's API with a query, so a file that is not a database, or one another process
        # holds locked, fails here first, as NoFTS5Error: ask SQLite itself for the reason to name.
        # The lock was waited for once already: asking again must not wait the busy timeout a second time.
        reason: apsw.Error = exc
        connection.setbusytimeout(0)
        try:
            connection.execute("PRAGMA schema_version").fetchall()
        except apsw.Error as real:
            reason = real
        connection.close()
        raise database_error(path, reason) from exc
    return connection


def _checkpoint_and_close(connection: apsw.Connection) -> None:
    """`PRAGMA optimize` (statistics for the next start's query plans), then close. Optimize is a nicety:
    on a read-only home, a full disk or a damaged page it fails after everything the command did has been
    stored, and that must not turn a finished command into a traceback (decision 320)."""
    try:
        connection.execute("PRAGMA optimize")
    except apsw.ReadOnlyError:
        log.debug("klaw.db is read-only: not optimized at close")  # reading a read-only home is fine
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        log.warning("%s", database_error(Path(connection.filename), exc))
    except apsw.FullError:
        log.warning("klaw.db was not optimized at close: %s", full_words(Path(connection.filename)))
    except apsw.Error as exc:
        log.warning("klaw.db was not optimized at close: %s", type(exc).__name__)
    finally:
        connection.close()


def _vec0_path() -> str:
    """sqlite-vec's loadable extension: what `sqlite_vec.loadable_path()` answers (the package folder's
    `vec0`), found without running the package's `__init__`, which imports numpy (~0.2 s of every start)
    for a `register_numpy` klaw never calls: `klaw memory list`, `db info` or `tools` touch no vector
    (decision 437). ImportError when sqlite-vec is not installed, as importing it would raise. Found once a
    process: `find_spec` of a package not imported searches every folder of `sys.path` again at each call, and
    read connections open on their thread's first read, during turns (tests/engine/test_turn_imports.py)."""
    global _vec0_found
    if _vec0_found is None:
        spec = importlib.util.find_spec("sqlite_vec")
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError("No module named 'sqlite_vec'", name="sqlite_vec")
        _vec0_found = os.path.normpath(os.path.join(os.path.dirname(spec.origin), "vec0"))
    return _vec0_found


_vec0_found: str | None = None
