"""LLM slots: at most `size` model calls at once, interactive turns served before everything else.

A person waiting for an answer should never queue behind a background task. Waiters are served
by (priority, arrival) order; a call in flight is never interrupted; a slot freed goes straight
to the best waiter, so a late interactive request overtakes earlier subagent requests. A slot is
held around one model call, never across the tools between calls (decision 297): a task's run
whose tools take minutes holds no slot meanwhile.

With two slots or more, one is kept for people's turns (`Priority.INTERACTIVE`): subagent runs and
summaries together take at most `size - 1`, so however long their model calls are, a chat's turn
finds a slot free or waits only for other chats (decision 297).
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
        # What non-interactive holders may take together: all but one, unless there is only one.
        self.background_size = size - 1 if size > 1 else size
        self._in_use = 0
        self._background_in_use = 0
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
        """One slot for the body (one model call): taken in priority order, given back at its end."""
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release(priority)

    def _free_for(self, priority: Priority) -> bool:
        if self._in_use >= self.size:
            return False
        return priority is Priority.INTERACTIVE or self._background_in_use < self.background_size

    def _take(self, priority: Priority) -> None:
        self._in_use += 1
        if priority is not Priority.INTERACTIVE:
            self._background_in_use += 1

    async def _acquire(self, priority: Priority) -> None:
        if self._free_for(priority) and not self.queue_depth:
            self._take(priority)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (int(priority), next(self._order), future))
        self._grant()  # a free slot the queued ones may not take (the kept one) may be this one's
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release(priority)  # the slot was handed over just as we were cancelled: pass it on
            raise

    def _release(self, priority: Priority) -> None:
        self._in_use -= 1
        if priority is not Priority.INTERACTIVE:
            self._background_in_use -= 1
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to the best waiters. The heap is in priority order, so a waiter the kept slot
        refuses (a background one) means every waiter after it is refused too."""
        while self._waiters:
            rank, _, future = self._waiters[0]
            if future.done():  # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            priority = Priority(rank)
            if not self._free_for(priority):
                return
            heapq.heappop(self._waiters)
            self._take(priority)
            future.set_result(None)
