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

Alone, a small read runs on the caller's thread (decision 533): when the engine says it has one turn at
most in flight (`one_turn`, set by the engine; never outside one) and no read is on the read threads,
a turn's read whose kind cost less than `INLINE_MAX_SECONDS` of CPU the last times it ran, of a chat
with no larger kind of read (`ReadCosts`), runs at once on the event loop's own read connection, with
the same snapshot rules: the two thread wake-ups of a hop cost more than the read. With other turns in
flight, a read under way, a large read or a large chat, nothing changes: the loop is never held for long
while another chat waits for it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable
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

# A read of a kind (its function's code and the caller's key, e.g. the chat) that cost at most this much
# CPU, as its recent runs averaged, runs on the caller's thread when the engine is alone (decision 533).
INLINE_MAX_SECONDS = 0.003
_WEIGHT = 0.25  # of the newest cost in a kind's average
_KINDS_KEPT = 4096


def never() -> bool:
    """The "one turn in flight?" signal outside an engine (a command, a test's store): never alone."""
    return False


class ReadCosts:
    """The CPU each kind of read cost lately (a moving average), written by whichever thread ran it.

    A kind is small when its average is at most `INLINE_MAX_SECONDS`, it carries a key (a turn's reads do:
    the chat, the statement; a summarizer's keyless reads run between turns, where a hop costs the turn
    nothing), and no other kind of that key is large: a chat whose full text costs more (100k messages)
    keeps its neighbours' and vectors' reads on the read threads too, as before."""

    def __init__(self) -> None:
        self._seconds: dict[tuple[object, Hashable], float] = {}
        self._large: dict[Hashable, set[object]] = {}  # key -> its kinds' functions measured large

    def small(self, kind: tuple[object, Hashable]) -> bool:
        """Measured, under `INLINE_MAX_SECONDS`, keyed, of a key with no large kind; one never run is not."""
        seconds = self._seconds.get(kind)
        return (
            seconds is not None
            and seconds <= INLINE_MAX_SECONDS
            and kind[1] is not None
            and not self._large.get(kind[1])
        )

    def ran(self, kind: tuple[object, Hashable], seconds: float) -> None:
        kept = self._seconds.get(kind)
        if kept is None and len(self._seconds) >= _KINDS_KEPT:
            self._seconds.clear()  # many chats' kinds: measured again from their next reads
            self._large.clear()
        average = self._seconds[kind] = seconds if kept is None else kept + _WEIGHT * (seconds - kept)
        function, key = kind
        if key is None:
            return
        large = self._large.setdefault(key, set())
        if average > INLINE_MAX_SECONDS:
            large.add(function)
        else:
            large.discard(function)


class ReadPool:
    """`READ_THREADS` threads, each with its own read-only connection, opened on first use."""

    def __init__(self, path: Path, connect: Callable[[Path], apsw.Connection], threads: int = READ_THREADS) -> None:
        self._path = path
        self._connect = connect
        self._local = threading.local()
        self._opened: list[apsw.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._inline = True  # False once closing: the loop's connection is closed with the others
        self._worker = ThreadWorker("klaw-sqlite-read", threads)  # the lighter hop of decision 491
        self.one_turn: Callable[[], bool] = never  # the engine's: at most one turn in flight (decision 533)
        self.costs = ReadCosts()
        self._under_way = 0  # reads sent to the threads and not yet answered (counted on the loop)
        self.inline_reads = 0  # reads run on the caller's thread, for tests and probes

    @property
    def idle(self) -> bool:
        """No read sent to the read threads is under way."""
        return not self._under_way

    @property
    def alone(self) -> bool:
        """At most one turn in flight in the engine and the read threads idle: what a read done on the loop
        now would hold up is that turn alone (decision 533). Always False outside an engine."""
        return not self._under_way and self.one_turn()

    async def read(self, fn: Callable[[apsw.Connection], T], key: Hashable = None) -> T:
        """`fn` in a read transaction: on the caller's thread when alone and its kind (`fn`'s code, `key`)
        is small, else on a read thread. Its result or its exception, the same either way."""
        kind = (getattr(fn, "__code__", fn), key)
        if self._inline and self.costs.small(kind) and self.alone:
            self.inline_reads += 1
            answer = self._timed(kind, fn)
            await asyncio.sleep(0)  # what became ready meanwhile (the turn's opening write) goes on first
            return answer
        self._under_way += 1
        try:
            return await self._worker.call(self._timed, kind, fn)
        finally:
            self._under_way -= 1

    def _timed(self, kind: tuple[object, Hashable], fn: Callable[[apsw.Connection], T]) -> T:
        connection = self._connection()  # its opening (sqlite-vec loaded) is not the read's cost
        started = time.thread_time()
        try:
            return self._in_snapshot(connection, fn)
        finally:
            self.costs.ran(kind, time.thread_time() - started)

    @staticmethod
    def _in_snapshot(connection: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
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

    def closing(self) -> None:
        """On the loop, before `close` is handed to another thread: no read starts on the loop from now on,
        and none is running (a read there runs to its end before the loop runs anything else)."""
        self._inline = False

    def close(self) -> None:
        """Wait for the reads under way, then close every connection (blocking: call off the loop)."""
        self._closed = True
        self._inline = False
        self._worker.shutdown()
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()
