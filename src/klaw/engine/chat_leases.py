"""This engine's chat leases on a store several engines share (docs/decisions/170-chat-leases.md).

A chat's turn runs only while this engine holds the chat's lease (`hold`): the lease is taken before
the turn (waiting while another engine's is valid), renewed in the background while the engine lives,
and released when the turn ends, so a message that reached another engine meanwhile gets its turn
there at once. `watch` finds chats left unanswered under no valid lease (an engine that died, whose
leases expired) and hands them to the processor, which takes them over.

Lease times are the database server's clock, so the waits here are real time (`asyncio.sleep`), never
the engine's clock that tests advance by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta

from klaw.store.lease_fence import LeaseFence, fenced
from klaw.store.protocol import IndexMismatchError, StorageError
from klaw.store.records import ChatRef
from klaw.store.work_protocol import ChatLeaseRepository

log = logging.getLogger(__name__)


def engine_name() -> str:
    """This engine process among those sharing the store: host, pid, and a random part (pids repeat)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ChatLeases:
    def __init__(self, repository: ChatLeaseRepository, seconds: float, holder: str | None = None) -> None:
        self._repository = repository
        self.seconds = seconds
        self.holder = holder or engine_name()
        self._held: set[ChatRef] = set()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def held(self) -> frozenset[ChatRef]:
        return frozenset(self._held)

    @contextlib.asynccontextmanager
    async def hold(self, chat: ChatRef) -> AsyncIterator[None]:
        """The chat's lease for the block: waits while another engine holds it (its turn runs there),
        released at the end. One engine takes a chat's lease once at a time (the processor's chat lock)."""
        generation = await self._acquire(chat)
        self._held.add(chat)
        try:
            with fenced(LeaseFence(chat, self.holder, generation)):  # the block's writes need the lease
                yield
        finally:
            self._held.discard(chat)
            with contextlib.suppress(StorageError):  # unreleased, it expires
                await self._repository.release(chat, self.holder)

    async def forgotten_after(self, chat: ChatRef, rowid: int) -> bool:
        """Whether any engine stored a forget in the chat after the message `rowid` (decision 286)."""
        return await self._repository.forgotten_after(chat, rowid)

    async def _acquire(self, chat: ChatRef) -> int:
        """Poll: the holder is another process, which can signal nothing here. The lease's generation."""
        poll = min(0.5, self.seconds / 4)
        while True:
            try:
                generation = await self._repository.acquire(chat, self.holder, self.seconds)
            except asyncio.CancelledError:
                # A `/forget` stopped the waiting turn mid-take (decision 286): the take may have landed, so
                # it is given back, within a lease's time (it expires by then anyway).
                with contextlib.suppress(StorageError, TimeoutError):
                    async with asyncio.timeout(self.seconds):  # not wait_for, which can drop a cancel: decision 428
                        await self._repository.release(chat, self.holder)
                raise
            if generation is not None:
                return generation
            await asyncio.sleep(poll)

    def start(
        self,
        take_over: Callable[[ChatRef], Awaitable[None]],
        now: Callable[[], datetime],
        within: timedelta,
        displaced: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """Renew the leases held, and watch for chats no engine serves: `take_over` each whose unanswered
        message is younger than `within` yet older than a lease (an engine alive takes the lease of a
        chat within its debounce of accepting a message: its chats are never taken from it). `displaced`
        is told once, in words, when this engine comes back from a stall to a database another embedder
        took meanwhile (decision 541)."""
        self._tasks = [
            asyncio.create_task(self._renew_forever(displaced), name="lease-renewal"),
            asyncio.create_task(self._watch_forever(take_over, now, within), name="lease-watch"),
        ]

    async def _renew_forever(self, displaced: Callable[[str], Awaitable[None]] | None) -> None:
        kept = True  # this engine's own record is renewed until another embedder took the database
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                if kept and await self._repository.keep(self.holder, self.seconds):
                    log.warning(
                        "this engine stalled past its lease (database.leaseSeconds) and its record on the shared"
                        " database had been dropped: restored, so an engine with another embedder is refused again"
                    )
            except IndexMismatchError as exc:  # its row is not restored: the other engine's embedder holds
                kept = False
                log.error("%s", exc)
                if displaced is not None:
                    await displaced(str(exc))
            except Exception as exc:
                log.warning("this engine's record not renewed: %s", _reason(exc))
            try:
                lost = await self._repository.renew(sorted(self._held, key=str), self.holder, self.seconds)
            except Exception as exc:  # the server away for a moment: the next round tries again
                log.warning("chat leases not renewed: %s", _reason(exc))
                continue
            for chat in lost & self._held:
                log.error("the lease of chat %s expired and another engine took it: its turn writes no more", chat)

    async def _watch_forever(
        self, take_over: Callable[[ChatRef], Awaitable[None]], now: Callable[[], datetime], within: timedelta
    ) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                at = now()
                since, until = at - within, at - timedelta(seconds=self.seconds)
                for chat in await self._repository.unserved(since, until, self.holder):
                    if chat not in self._held:
                        await take_over(chat)
            except Exception as exc:
                log.warning("looking for chats no engine serves failed: %s", _reason(exc))

    async def aclose(self) -> None:
        """Stop renewing and give every lease back, so other engines take these chats at once."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        with contextlib.suppress(StorageError):
            await self._repository.release_all(self.holder)


def _reason(exc: Exception) -> str:
    """A storage error's own sentence (it names the variable, never the DSN); otherwise only the type."""
    return str(exc) if isinstance(exc, StorageError) else type(exc).__name__
