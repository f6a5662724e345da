"""How many sandbox runs may go at once: a cap for the engine and a smaller one per chat.

The engine runs one model reply's tool calls together, so without a cap a reply asking for 60
`code_execute` calls starts 60 sandboxes at once, each allowed `sandbox.memoryMb` per process
(docs/decisions/224-sandbox-runs-bounded-together.md). A call takes a slot of its chat first, then
one of the engine: one chat's queue therefore holds at most its per-chat share of the engine's
waiting line, and another chat's single call waits behind at most that, never behind all 60. The
wait is not part of the run's own time limit (that starts when the run does); it is bounded by what is
left of the engine's per-call limit, and a call that cannot start within it is told so and not run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable

from klaw.errors import KlawError


class NoSlot(KlawError, RuntimeError):
    """The call waited as long as it could and every slot was still taken (code_execute says so)."""


class RunSlots:
    """`total` runs at once in the engine, `per_chat` of them for one chat. The semaphores belong to the
    loop they are first used in; an engine used from a new loop (a library caller's second
    `asyncio.run`) gets new ones, since nothing of the old loop still runs."""

    def __init__(self, total: int, per_chat: int) -> None:
        self.total = total
        self.per_chat = min(per_chat, total)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._engine = asyncio.Semaphore(total)
        self._chats: dict[Hashable, tuple[asyncio.Semaphore, int]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, chat: Hashable, wait_seconds: float) -> AsyncIterator[None]:
        """Hold a slot of `chat` and one of the engine while the body runs; NoSlot after `wait_seconds`
        without both."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._engine, self._chats = loop, asyncio.Semaphore(self.total), {}
        chat_slots = self._join(chat)
        try:
            try:
                async with asyncio.timeout(wait_seconds):
                    await chat_slots.acquire()
                    try:
                        await self._engine.acquire()
                    except BaseException:
                        chat_slots.release()
                        raise
            except TimeoutError:
                raise NoSlot from None
            try:
                yield
            finally:
                self._engine.release()
                chat_slots.release()
        finally:
            self._leave(chat)

    def _join(self, chat: Hashable) -> asyncio.Semaphore:
        slots, users = self._chats.get(chat) or (asyncio.Semaphore(self.per_chat), 0)
        self._chats[chat] = (slots, users + 1)
        return slots

    def _leave(self, chat: Hashable) -> None:
        slots, users = self._chats[chat]
        if users <= 1:
            del self._chats[chat]
        else:
            self._chats[chat] = (slots, users - 1)
