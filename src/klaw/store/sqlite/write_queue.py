"""The database thread's queue: calls run in the order they came, and writes waiting side by side commit
together (decision 353).

With many chats at once, the turns' appends (a message, an exchange's opening, a reply with its close)
queue on the one database thread, 20–50 deep in `klaw bench turn`'s many-chats phase. Each was its own
transaction, and a commit is ~60 % of an append's cost (decision 336: ~21 WAL pages, one for each b-tree
the row touches, written again by the next append touching the same pages). A write that says it may
share (`grouped`) and finds others of its kind right behind it in the queue runs with them in one
transaction, the caller told of its result only once the commit is done, as before.

Inside a group's transaction the repositories' `with connection:` blocks open no savepoint
(`WriterConnection`, decision 385): FTS5 writes its pending terms out as a new index segment at every
savepoint, so a savepoint a call made each append its own segment, with the merges that follow (4×
the CPU of an insert into the full-text index). No call of a group needs one: a call that fails, or an
error that passes through any of its `with connection:` blocks even if the call then catches it, rolls
the whole group back and runs each call again alone, where the blocks are savepoints again. A grouped
call with no neighbour runs the same way, in a transaction of its own.

What a caller sees is what it saw when each ran alone:

- The order is the queue's: a group is only ever calls that came one after the other, so a read or a
  write that may not share, queued between two appends, still runs between them.
- Nothing is acknowledged before its commit, so a crash loses only what was never acknowledged; the
  conversation log, written and fsync'd before the row (decision 211), has it.
- If any call of a group fails, or the commit does, the whole group is rolled back and each call runs
  again alone, as it would have: the one that failed fails with its own error, the others are stored. A
  group never mixes one chat's failure into another's answer. The callbacks of `after_rollback` run
  first (`ChatKeys` forgets keys it may have read from a chat row the rollback took away).

A call cancelled before it started is skipped, as `ThreadPoolExecutor` skipped it, unless it must run
once submitted (`run_after`'s row, its log line written). Results reach the caller's loop future through
`thread_worker.deliver` (decision 491), a group's in one wake-up of the loop.

**Background work waits behind the turns** (decision 382). A call marked `behind` (the embedding queue's
claim and its vectors' puts, the full-text index's merge steps, the note that a reply was shown: work no
person's turn waits for) runs only when no other call waits, so a person's message, an exchange's id or
a reply queued after it is not stuck behind it. The other calls keep the order they came in, the
background calls theirs, and a group is only ever calls of one line. Nothing a caller could observe as
ordered is reordered: a caller that awaited a call's result submits after it ran. So that the
background is never starved by a steady stream of turns, after `AHEAD_IN_A_ROW` steps of other calls
while a background call waited, the background call waiting longest runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import apsw

from klaw.store.sqlite.thread_worker import ThreadWorker, deliver, settle

T = TypeVar("T")

MAX_GROUP = 32
"""Calls one transaction takes at most: the first caller of a group waits for the others' work before
its commit, so a group stays a few milliseconds long."""

AHEAD_IN_A_ROW = 4
"""Steps of other calls that run in a row while a `behind` call waits, before it: turns never wait behind
background work, and background work is never starved by turns."""


class WriterConnection(apsw.Connection):
    """The database thread's connection (`open_connection(writer=True)`): while a group of calls runs,
    `with connection:` opens no savepoint and only notes an error passing through it (`spoiled`); at
    other times it is apsw's own savepoint or transaction."""

    grouping = False
    spoiled = False

    def __enter__(self) -> apsw.Connection:
        if self.grouping:
            return self
        return super().__enter__()

    def __exit__(
        self, etype: type[BaseException] | None, evalue: BaseException | None, etraceback: TracebackType | None
    ) -> bool:
        if self.grouping:
            if etype is not None:
                self.spoiled = True  # whatever the call does with it, its group runs again call by call
            return False
        return super().__exit__(etype, evalue, etraceback)


@dataclass(slots=True)
class _Call:
    fn: Callable[[apsw.Connection], Any]
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[Any]
    grouped: bool
    always: bool  # run even if its awaiter was cancelled before it started

    def skipped(self) -> bool:
        """Cancelled before it started, and allowed to be skipped then."""
        return not self.always and self.done.cancelled()

    def failed(self, error: BaseException) -> None:
        deliver(self.loop, self.done, None, error)

    def finished(self, result: Any) -> None:
        deliver(self.loop, self.done, result, None)


def _settle_all(calls: list[_Call], results: list[Any]) -> None:
    """On the loop: a group's results, one wake-up for all of them."""
    for call, result in zip(calls, results, strict=True):
        settle(call.done, result, None)


class _Spoiled(Exception):
    """An error passed through a `with connection:` block of a grouped call: its group is rolled back."""


class WriteQueue:
    """Calls on `connection`, run one at a time by `worker`'s single thread."""

    def __init__(self, worker: ThreadWorker, connection: apsw.Connection) -> None:
        self._worker = worker
        self._connection = connection
        self._calls: deque[_Call] = deque()  # in the order they came
        self._behind: deque[_Call] = deque()  # background work: when nothing above waits (decision 382)
        self._ahead_in_a_row = 0
        self._lock = threading.Lock()
        self._after_rollback: list[Callable[[], None]] = []
        self._steps = 0  # steps submitted and not yet ended (each submit queues one): 0 while the thread is idle
        self._step_open = False  # the running step's count not yet taken back (the database thread's alone)

    def after_rollback(self, callback: Callable[[], None]) -> None:
        """`callback()` on the database thread whenever a group is rolled back, before its calls run again."""
        self._after_rollback.append(callback)

    def submit(
        self,
        fn: Callable[[apsw.Connection], T],
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[T],
        *,
        grouped: bool = False,
        behind: bool = False,
        always: bool = False,
    ) -> None:
        """`fn(connection)` after every call of its line submitted before it, its outcome given to `done`
        on `loop` (any thread may submit); `grouped`: it may share a transaction with the grouped calls
        next to it (a write in a `with connection:` block of its own, nothing else); `behind`: background
        work no turn waits for, run when no other call waits (the module's docstring); `always`: run even
        if `done` is cancelled before it starts."""
        call = _Call(fn, loop, done, grouped, always)
        line = self._behind if behind else self._calls
        with self._lock:
            line.append(call)
            self._steps += 1
        try:
            self._worker.call_soon(self._step)
        except BaseException:
            with self._lock, contextlib.suppress(ValueError):
                self._steps -= 1
                line.remove(call)
            raise

    @property
    def idle(self) -> bool:
        """Whether the thread has nothing queued or running at this moment: a hint for `run_after`, which
        then gives this thread the log write too (decision 519); it may change at once, and either way is right."""
        return self._steps == 0

    def _line(self) -> deque[_Call] | None:
        """The line the next step takes from (under the lock), None when both are empty."""
        if self._calls and (not self._behind or self._ahead_in_a_row < AHEAD_IN_A_ROW):
            self._ahead_in_a_row = self._ahead_in_a_row + 1 if self._behind else 0
            return self._calls
        self._ahead_in_a_row = 0
        return self._behind or None

    def _step(self) -> None:
        """One step of the thread: the call first in line, with the grouped calls right behind it when it is one."""
        self._step_open = True
        try:
            self._take_step()
        finally:
            self._end_step()

    def _end_step(self) -> None:
        """The step's count taken back, once, before it gives its last result: a caller resumed by that result
        finds the thread idle (`run_after`'s next write is then the database thread's whole)."""
        if self._step_open:
            self._step_open = False
            with self._lock:
                self._steps -= 1

    def _take_step(self) -> None:
        with self._lock:
            line = self._line()
            if line is None:
                return  # an earlier step took this one's call into its group
            batch = [line.popleft()]
            if batch[0].grouped:
                while line and line[0].grouped and len(batch) < MAX_GROUP:
                    batch.append(line.popleft())
        calls = [call for call in batch if not call.skipped()]
        if calls and calls[0].grouped and self._together(calls):
            return
        for call in calls:
            self._alone(call, last=call is calls[-1])

    def _together(self, calls: list[_Call]) -> bool:
        """Every call in one transaction, their results given once it committed; False (nothing kept, no
        result given) when a call or the commit failed."""
        connection = self._connection
        if connection.in_transaction:
            return False  # not a state any caller leaves; run alone, as before
        results: list[Any] = []
        plain = not isinstance(connection, WriterConnection)
        if plain and len(calls) == 1:
            return False  # each call in its own savepoints: one alone is its own transaction already
        try:
            connection.execute("BEGIN")
            for call in calls:
                results.append(self._grouped(call, connection))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(apsw.Error):
                    connection.execute("ROLLBACK")
            for callback in self._after_rollback:
                callback()
            return False
        by_loop: dict[asyncio.AbstractEventLoop, tuple[list[_Call], list[Any]]] = {}
        for call, result in zip(calls, results, strict=True):
            mine = by_loop.setdefault(call.loop, ([], []))
            mine[0].append(call)
            mine[1].append(result)
        self._end_step()
        for loop, (theirs, their_results) in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a loop closed meanwhile has nobody left to tell
                loop.call_soon_threadsafe(_settle_all, theirs, their_results)
        return True

    @staticmethod
    def _grouped(call: _Call, connection: apsw.Connection) -> Any:
        """`call` inside the group's transaction, its `with connection:` blocks without savepoints."""
        if not isinstance(connection, WriterConnection):
            return call.fn(connection)
        connection.grouping, connection.spoiled = True, False
        try:
            result = call.fn(connection)
        finally:
            connection.grouping = False
        if connection.spoiled:
            raise _Spoiled
        return result

    def _alone(self, call: _Call, *, last: bool = False) -> None:
        try:
            result = call.fn(self._connection)
        except BaseException as exc:
            if last:
                self._end_step()
            call.failed(exc)
        else:
            if last:
                self._end_step()
            call.finished(result)
