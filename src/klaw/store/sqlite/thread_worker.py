"""Threads the event loop hands blocking work to, with the lightest hand-off that keeps an executor's
promises (decision 491).

`loop.run_in_executor` on a `ThreadPoolExecutor`, and `asyncio.wrap_future` of a concurrent future, make
each hop a `concurrent.futures.Future` (with its `Condition`), two chained callbacks and a copy of its
state onto the loop's future: ~31–58 µs of the loop's CPU a hop (decision 481), ~16 hops a turn. Here a
worker takes its work from a `queue.SimpleQueue` and completes the loop's own future with one
`loop.call_soon_threadsafe`: ~14–18 µs. What the executors gave is kept:

- Work whose awaiting task was cancelled before the work started is not run (`ThreadPoolExecutor`'s
  `set_running_or_notify_cancel`); work that started runs to its end, its result dropped.
- An exception of the work is raised in the awaiting task; a result is never set on a future cancelled
  meanwhile (no `InvalidStateError` on the loop).
- `shutdown` runs everything queued before it, then stops and joins the threads: none is left behind.
- Each thread is the same thread for its whole life, so a connection kept in a `threading.local` stays
  with one thread.
- At the interpreter's exit the threads finish what was queued and stop, as an executor's do (the same
  hook of `threading` that `concurrent.futures` uses), so a store never closed does not hang the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_STOP = object()
_LIVE: weakref.WeakSet[ThreadWorker] = weakref.WeakSet()


def _at_exit() -> None:
    """Before the interpreter joins its threads: every worker's threads told to stop after their queue."""
    for worker in list(_LIVE):
        worker.stop()


_register_atexit = getattr(threading, "_register_atexit", None)  # concurrent.futures' own hook (CPython)
if _register_atexit is not None:
    _register_atexit(_at_exit)


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: give `future` its outcome unless its awaiter gave up on it (cancelled) meanwhile."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def deliver(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    """From a worker thread: `settle` on `loop`. A loop already closed has nobody left to tell."""
    with contextlib.suppress(RuntimeError):  # the loop is closed: its tasks are gone
        loop.call_soon_threadsafe(settle, future, result, error)


class ThreadWorker:
    """`threads` threads named `name`-N, started on first use, taking work in the order it came."""

    def __init__(self, name: str, threads: int = 1) -> None:
        self._name = name
        self._count = threads
        self._work: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stopped = False

    def call_soon(self, fn: Callable[[], object]) -> None:
        """`fn()` on a worker thread, nobody waiting for it (its own code tells whom it must). RuntimeError
        after `shutdown`, as an executor's `submit`."""
        self._put(fn)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on a worker thread, its result or exception here; skipped if this task is cancelled
        before it starts."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._put((loop, future, fn, args))
        return await future

    def _put(self, item: object) -> None:
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"cannot schedule new work after {self._name} was shut down")
            if not self._threads:
                for number in range(self._count):
                    thread = threading.Thread(
                        target=self._serve, name=f"{self._name}_{number}", daemon=_register_atexit is None
                    )
                    thread.start()
                    self._threads.append(thread)
                _LIVE.add(self)
            self._work.put(item)

    def _serve(self) -> None:
        take = self._work.get
        while True:
            item = take()
            if item is _STOP:
                return
            self._one(item)
            del item  # nothing of the work kept alive while waiting for the next

    def _one(self, item: Any) -> None:
        if not isinstance(item, tuple):
            try:
                item()
            except BaseException:  # such work tells its own callers of its errors: this is a bug in it
                log.exception("work on %s failed", self._name)
            return
        loop, future, fn, args = item
        if future.cancelled():  # its awaiter gave up before it started: not run
            return
        try:
            result = fn(*args)
        except BaseException as exc:
            deliver(loop, future, None, exc)
        else:
            deliver(loop, future, result, None)

    def stop(self) -> list[threading.Thread]:
        """No new work; the threads stop once they ran what is queued. The threads to join (none the second time)."""
        with self._lock:
            if self._stopped:
                return []
            self._stopped = True
            for _ in self._threads:
                self._work.put(_STOP)
            return list(self._threads)

    def shutdown(self) -> None:
        """Run what is queued, then stop and join the threads (blocking: call off the loop). Idempotent."""
        threads = self.stop()
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join()
