"""A cancellation an await below klaw swallowed, delivered again (decision 428).

Python 3.11's `asyncio.wait_for` returns what it awaited when its caller's cancellation arrives in the
same loop pass as that result (CPython gh-86296; 3.12 rewrote `wait_for` on `asyncio.timeout`, and the fix
was not backported). psycopg_pool waits for a free connection so (`WaitingClient.wait`, its
`wait_timeout`), and its maintainers leave 3.11's `wait_for` as it is (psycopg#1413): a task cancelled
just as the pool hands it a connection went on with the connection, and a shutdown awaiting that task
waited forever. klaw's own code uses `asyncio.timeout`, which keeps the cancellation.

The task still counts the request (`Task.cancelling()`): code that means to swallow a cancellation undoes
it with `uncancel()`, as `asyncio.timeout` does, so a count higher after an await than before it is a
cancellation lost on the way. Imports nothing else of klaw.
"""

from __future__ import annotations

import asyncio
from typing import Any


def cancel_requests() -> int:
    """How many cancellations of the running task are outstanding (0 outside a task)."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


def take_back_cancellation() -> None:
    """Undo one cancellation request of the running task (nothing outside a task): a Ctrl-C or SIGTERM that
    asyncio.run turned into one is taken back so the orderly shutdown that follows runs whole (its parts ask
    `cancelling()` whether their caller is being cancelled, and would stop half-way)."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def deliver_lost_cancellation(before: int) -> None:
    """Raise `CancelledError` when the running task was asked to stop since `cancel_requests()` said
    `before`, and the awaits since then returned as if it had not."""
    if cancel_requests() > before:
        raise asyncio.CancelledError


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancel `tasks` and wait until each has ended, however it ended (what they raise is theirs to
    report). A cancellation of the running task itself meanwhile is raised, not swallowed with theirs
    (`with suppress(CancelledError): await task` took the caller's for the task's)."""
    before = cancel_requests()
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            deliver_lost_cancellation(before)
