"""Per-chat debounce: gather a burst of messages and hand them over once the chat goes quiet.

A person often sends several short messages in a row; answering each would waste LLM calls and
produce a disjointed conversation. Each chat has its own timer: a new message restarts it; when
`delay` passes with no new message the pending messages are flushed, in arrival order, to the
callback. Chats never wait for each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from klaw.engine.clock import Clock

log = logging.getLogger(__name__)
K = TypeVar("K")
T = TypeVar("T")


class Debouncer(Generic[K, T]):
    def __init__(self, delay_seconds: float, on_flush: Callable[[K, list[T]], Awaitable[None]], clock: Clock) -> None:
        self._delay = delay_seconds
        self._on_flush = on_flush
        self._clock = clock
        self._pending: dict[K, list[T]] = {}
        self._timers: dict[K, asyncio.Task[None]] = {}
        self._flushing: set[asyncio.Task[None]] = set()

    def add(self, key: K, item: T) -> None:
        """Queue `item` for `key` and (re)start that key's timer."""
        self._pending.setdefault(key, []).append(item)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._timers[key] = asyncio.create_task(self._expire(key), name=f"debounce-{key}")

    def pending(self, key: K) -> int:
        return len(self._pending.get(key, ()))

    @property
    def waiting_chats(self) -> int:
        return len(self._pending)

    async def _expire(self, key: K, delay: float | None = None) -> None:
        if delay != 0.0:
            await self._clock.sleep(self._delay if delay is None else delay)
        self._timers.pop(key, None)
        items = self._pending.pop(key, [])
        if not items:
            return
        task = asyncio.current_task()
        assert task is not None
        self._flushing.add(task)
        try:
            await self._on_flush(key, items)
        except Exception as exc:  # the turn runner catches its own; this is a guard, by type only
            log.error(
                "processing a debounced batch failed (chat %s, %d messages): %s", key, len(items), type(exc).__name__
            )
        finally:
            self._flushing.discard(task)

    async def flush_all(self) -> None:
        """Flush every chat now (graceful shutdown: nothing accepted is left unanswered)."""
        for timer in list(self._timers.values()):
            timer.cancel()
        self._timers.clear()
        batches, self._pending = self._pending, {}
        results = await asyncio.gather(
            *(self._on_flush(key, items) for key, items in batches.items()), return_exceptions=True
        )
        # One failing batch must not stop the others, nor the shutdown that waits for them (the store
        # still has to close); the failure is logged by type, as `_expire` does.
        for key, result in zip(batches, results, strict=True):
            if isinstance(result, Exception):
                log.error("processing a debounced batch failed (chat %s): %s", key, type(result).__name__)
            elif isinstance(result, BaseException):
                raise result

    def expire_now(self, key: K) -> None:
        """End `key`'s wait now: its pending items are handed over without waiting for the delay."""
        if key not in self._pending:
            return
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._timers[key] = asyncio.create_task(self._expire(key, delay=0.0), name=f"debounce-{key}")

    def take(self, key: K) -> list[T]:
        """`key`'s pending items, taken out: they will not be handed over (a turn stopped before it began)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        return self._pending.pop(key, [])

    def cancel_all(self) -> None:
        """Drop every timer and pending batch without running it (a start-up that failed: the messages
        stay stored and unanswered, and the next start resumes them)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._pending.clear()

    async def wait_idle(self) -> None:
        """Wait for flushes in progress to finish."""
        while self._flushing:
            await asyncio.gather(*list(self._flushing), return_exceptions=True)
