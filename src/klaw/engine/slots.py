"""LLM slots: at most `size` model calls at once, interactive turns served before subagents.

A person waiting for an answer should never queue behind a background task. Waiters are served
by (priority, arrival) order; a call in flight is never interrupted; a slot freed goes straight
to the best waiter, so a late interactive request overtakes earlier subagent requests. A holder
waiting on something other than a model (a person's answer to an approval question) sets its slot
aside meanwhile (`HeldSlot.set_aside`), so the other chats are not held up by a person away.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import IntEnum


class Priority(IntEnum):
    INTERACTIVE = 0
    SUBAGENT = 1
    BACKGROUND = 2  # summaries: after everything a person or a scheduled task waits for


class LlmSlots:
    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("the number of LLM slots must be > 0")
        self.size = size
        self._in_use = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def queue_depth(self) -> int:
        return sum(1 for _, _, f in self._waiters if not f.done())

    @asynccontextmanager
    async def hold(self, priority: Priority) -> AsyncIterator[None]:
        async with self.held(priority):
            yield

    @asynccontextmanager
    async def held(self, priority: Priority) -> AsyncIterator[HeldSlot]:
        """`hold`, giving the holder the slot to set aside while it waits for a person."""
        await self._acquire(priority)
        held = HeldSlot(self, priority)
        try:
            yield held
        finally:
            if held.holding:  # not if taking it back after `set_aside` was cancelled
                self._release()

    async def _acquire(self, priority: Priority) -> None:
        if self._in_use < self.size and not self.queue_depth:
            self._in_use += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (int(priority), next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # the slot was handed over just as we were cancelled: pass it on
            raise

    def _release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)  # the slot passes directly to this waiter
                return
        self._in_use -= 1


class HeldSlot:
    """A slot held by `LlmSlots.hold`, which its holder may set aside while it waits for a person."""

    def __init__(self, slots: LlmSlots, priority: Priority) -> None:
        self._slots = slots
        self._priority = priority
        self.holding = True

    @asynccontextmanager
    async def set_aside(self) -> AsyncIterator[None]:
        """Free the slot for the body's duration, then wait for one again (at the same priority)."""
        self._slots._release()
        self.holding = False
        try:
            yield
        finally:
            await self._slots._acquire(self._priority)
            self.holding = True
