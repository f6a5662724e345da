"""The event loop a long-running klaw process runs on: uvloop where it is installed, else asyncio's own.

With 50 chats at once the engine's event loop is the busiest thread; uvloop (libuv, in C) does the same
work (callbacks, sockets, timers, waking from worker threads) for ~0.4 ms less of that thread's CPU a turn
(decision 220). It is a dependency on Linux and macOS, where it has wheels (x86_64 and aarch64);
elsewhere, or if it fails to import, asyncio's loop runs the same code. Short commands keep `asyncio.run`:
they spend nothing on the loop. Imports nothing else of klaw.

Either loop gets `LoopErrors` as its exception handler (decision 276): a listener that cannot accept
because the process is out of open files (EMFILE) or memory is weather, not a bug, so it is one log line
saying what to do, at most once a minute with a count, instead of a traceback per failed accept
(asyncio's loop retried a whole backlog at a time: thousands of tracebacks in seconds). Only a listener's
accept is treated so (asyncio labels it `socket.accept() out of system resource`, or its handle runs
`_accept_connection`/`_start_serving`; uvloop's libuv drops such connections without asking): a task or
callback that fails with ENOMEM or EMFILE is a bug or a failure with its own story, so it goes to the
loop's default handler with its traceback and task name, as does every other error.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""The errors a listener's accept meets when the process or the system has no file or buffer left."""
ACCEPT_MESSAGE = "socket.accept() out of system resource"
"""The message asyncio's `_accept_connection` (3.11 to 3.13) gives the handler for such an error."""
ACCEPT_CALLBACKS = frozenset({"_accept_connection", "_start_serving"})
"""asyncio's listener callbacks (the accept, and the retry that re-arms it a second later)."""
REPORT_EVERY_SECONDS = 60.0


class LoopErrors:
    """An event loop's exception handler: running out of resources is one line (then one a minute, with a
    count), without a traceback; anything else goes to the loop's default handler."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._reported: float | None = None
        self._unreported = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if _retry_of_a_closed_listener(context):
            return  # asyncio's loop retries an accept a second after EMFILE even once the listener is closed
        if not (isinstance(exc, OSError) and exc.errno in OUT_OF_RESOURCES and _from_an_accept(context)):
            loop.default_exception_handler(context)
            return
        self._unreported += 1
        now = self._clock()
        if self._reported is not None and now - self._reported < REPORT_EVERY_SECONDS:
            return
        times = "" if self._unreported == 1 else f" ({self._unreported} times since the last report)"
        log.error(
            "%s: %s%s; new connections wait until some close. If this recurs, raise the open-files limit"
            " (ulimit -n, or LimitNOFILE= in a systemd unit) or find what holds so many connections",
            context.get("message", "the event loop"),
            os.strerror(exc.errno or 0),
            times,
        )
        self._reported, self._unreported = now, 0


def _from_an_accept(context: dict[str, Any]) -> bool:
    """Whether the error came from a listener accepting, not from a task or another callback: a failed
    task carries `future`/`task`, and its ENOMEM must keep its traceback and name."""
    if "future" in context or "task" in context:
        return False
    if context.get("message") == ACCEPT_MESSAGE:
        return True
    callback = getattr(context.get("handle"), "_callback", None)
    return getattr(callback, "__name__", "") in ACCEPT_CALLBACKS


def _retry_of_a_closed_listener(context: dict[str, Any]) -> bool:
    """asyncio's own loop (3.11) schedules a retry for every accept that failed out of resources, up to the
    listener's backlog of them; those that come after the listener closed (the process stopping) fail on
    its file descriptor, -1: nothing is wrong but the retry itself."""
    callback = getattr(context.get("handle"), "_callback", None)
    return isinstance(context.get("exception"), ValueError) and getattr(callback, "__name__", "") == "_start_serving"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop's loop when uvloop imports, with `LoopErrors` as its exception handler."""
    try:
        import uvloop
    except ImportError:
        has_uvloop = False  # asyncio's loop runs outside the except: no error shows this ImportError as context
    else:
        has_uvloop = True
    if not has_uvloop:
        return asyncio.run(_handled(main))
    return uvloop.run(_handled(main))


async def _handled(main: Coroutine[Any, Any, T]) -> T:
    asyncio.get_running_loop().set_exception_handler(LoopErrors())
    return await main


def loop_name() -> str:
    """The running loop's kind, "uvloop" or "asyncio", for benches and reports."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
