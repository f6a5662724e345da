"""Resting and stopping a background worker's task: the embedding queue and the summarizers alike.

Both workers rest until signalled or until a time passes on their injected clock (tests advance a
`ManualClock` instead of sleeping), and both are stopped at shutdown the same way: cancelled and
awaited, re-raising only when the caller itself is being cancelled, and never failing the shutdown
because the worker had died earlier (that is logged by error class, never content).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from klaw.cancellation import deliver_lost_cancellation

log = logging.getLogger(__name__)


async def rest(wake: asyncio.Event, sleep: Callable[[float], Awaitable[None]], seconds: float | None) -> None:
    """Until `wake` is set or, when `seconds` is given, that long has passed through `sleep`. A task asked
    to stop does not rest: a cancellation some await below swallowed ends the worker here instead of
    leaving the shutdown that cancelled it waiting for it forever (decision 428)."""
    deliver_lost_cancellation(0)
    if wake.is_set():
        return
    waits: set[asyncio.Future[object]] = {asyncio.ensure_future(wake.wait())}
    if seconds is not None:
        waits.add(asyncio.ensure_future(sleep(seconds)))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


async def stop_task(task: asyncio.Task[None], what: str) -> None:
    """Cancel `task` and wait for it. What it was doing is abandoned (its work stays owed, done after
    the next start); `what` names it in the log line when it had already died."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # our caller is being cancelled too, not just the worker
    except Exception as exc:  # it had died earlier; stopping goes on regardless
        log.warning("%s had stopped: %s", what, type(exc).__name__)
