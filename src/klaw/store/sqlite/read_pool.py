"""Read-only connections to klaw.db on threads of their own, so a turn's reads never queue behind writes.

The one database thread (`connection.py`) runs every write: a turn's appends, but also the embedding
queue's batches and the summarizers' scans and folds, ~30 calls a turn in `klaw bench turn`. A read
sent there waits for whatever is queued before it (decision 202). klaw.db is in WAL mode, where
readers run beside the writer, so the reads a turn waits for (its window, the vector search's
rescore and rows, the neighbours of its hits, word counts) run here instead: docs/decisions/216-read-connections.md.

What a read sees: the data committed when it starts. Each call is one read transaction (a snapshot
for all its statements) that ends with the call, so a writer's checkpoint is never held up for
long. A write the caller awaited is committed before the read is sent, so a turn sees its own
message; a forgotten message, deleted and committed before the read starts, is never seen. The
connections are `query_only` (a read path that tried to write would fail, not write through a
second connection) and load sqlite-vec, since the vector rescore reads `vec_messages`. They open
the file the writer created (0600) and create none: WAL's files exist already.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import apsw

from klaw.store.sqlite.thread_worker import ThreadWorker

T = TypeVar("T")

READ_THREADS = 2  # the turns of two LLM slots read at once; more would only share two CPUs further
# Readers do not map klaw.db into memory (decision 273's addendum). Mapped, a vector's exact rescore was
# ~2.8 ms of CPU cheaper at 100k messages, but a page the file no longer holds (klaw.db cut short under
# the engine, a failing SD card) is then a SIGBUS that kills the engine without a word, where read()
# gives an error the query reports; and every page read counted in the engine's resident memory.


def never() -> bool:
    """The "one turn in flight?" signal outside an engine (a command, a test's store): never alone."""
    return False


class ReadPool:
    """`READ_THREADS` threads, each with its own read-only connection, opened on first use."""

    def __init__(self, path: Path, connect: Callable[[Path], apsw.Connection], threads: int = READ_THREADS) -> None:
        self._path = path
        self._connect = connect
        self._local = threading.local()
        self._opened: list[apsw.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._worker = ThreadWorker("klaw-sqlite-read", threads)  # the lighter hop of decision 491
        self.one_turn: Callable[[], bool] = never  # the engine's: at most one turn in flight (decision 533)
        self._under_way = 0  # reads sent to the threads and not yet answered (counted on the loop)

    @property
    def idle(self) -> bool:
        """No read sent to the read threads is under way."""
        return not self._under_way

    @property
    def alone(self) -> bool:
        """At most one turn in flight in the engine and the read threads idle (decision 533)."""
        return not self._under_way and self.one_turn()

    async def read(self, fn: Callable[[apsw.Connection], T]) -> T:
        self._under_way += 1
        try:
            return await self._worker.call(self._in_snapshot, fn)
        finally:
            self._under_way -= 1

    def _in_snapshot(self, fn: Callable[[apsw.Connection], T]) -> T:
        connection = self._connection()
        connection.execute("BEGIN")  # deferred: the snapshot is taken at the first read
        try:
            return fn(connection)
        finally:
            connection.execute("COMMIT")  # a read transaction: ends the snapshot, writes nothing

    def _connection(self) -> apsw.Connection:
        connection: apsw.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect(self._path)
            connection.execute("PRAGMA query_only = ON")
            self._local.connection = connection
            with self._lock:
                self._opened.append(connection)
        return connection

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wait for the reads under way, then close every connection (blocking: call off the loop)."""
        self._closed = True
        self._worker.shutdown()
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()
