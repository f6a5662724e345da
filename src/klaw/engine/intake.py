"""Whether the message processor still takes messages, which it is taking now, and shutdown's drain.

Apart from processor.py so that the turn path has room (decision 521). A message being made durable when
the engine stops accepting is still queued for its turn: the drain flushes the debounces only once every
message accepted before the stop is queued (adversary22: one still being written was queued after the
flush, and its turn ran on closed parts), then waits for the turns in flight up to its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator

from klaw.engine.drain_deadline import DrainDeadline
from klaw.engine.failures import EngineStopping


class Intake:
    def __init__(self) -> None:
        self.open = True
        self._under_way = 0  # messages between the open check and their queue
        self._done = asyncio.Event()  # set when that is 0

    @property
    def under_way(self) -> int:
        """Messages being accepted now (the engine's "one turn in flight?" counts them: decision 533)."""
        return self._under_way

    @contextlib.contextmanager
    def taking(self) -> Iterator[None]:
        """Around one message's accept and queue; EngineStopping once the engine accepts no new messages."""
        if not self.open:
            raise EngineStopping("the engine is shutting down and accepts no new messages")
        self._under_way += 1
        self._done.clear()
        try:
            yield
        finally:
            self._under_way -= 1
            if not self._under_way:
                self._done.set()

    async def taken(self) -> None:
        """Once every message being taken now is queued."""
        if self._under_way:
            await self._done.wait()


async def drain(
    flush: Callable[[], Awaitable[None]],
    turn_tasks: set[asyncio.Task[None]],
    timeout_seconds: float,
    deadline: DrainDeadline | None = None,
) -> bool:
    """`flush` (the debounces), then the turns in flight, within the timeout (or the `deadline` brought
    forward: a second Ctrl-C); False when some were still running and were cancelled."""
    flushing = asyncio.ensure_future(flush())
    try:
        async with (deadline or DrainDeadline()).within(timeout_seconds):
            await flushing
            while turn_tasks:
                await asyncio.gather(*list(turn_tasks), return_exceptions=True)
        return True
    except TimeoutError:
        for task in [flushing, *turn_tasks]:
            task.cancel()
        return False
