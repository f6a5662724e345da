"""Time as a dependency: the engine asks a `Clock` for now and for waits, so tests control time.

`SystemClock` is the real thing. `ManualClock` only moves when a test calls `advance()`, which
wakes every sleeper whose deadline has passed, in deadline order, and lets them run before it
returns — debounce and scheduling are tested without real sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, UTC."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Seconds on the event loop's monotonic clock, which `sleep` runs on: a wait measured on it is
        the wait `sleep` counts, whatever the wall clock does meanwhile (stepped by NTP, a VM resumed)."""
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that only moves on `advance()`; for tests."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None], float]] = []
        self._order = itertools.count()
        self._slept = asyncio.Event()  # set on every new sleep, for `wait_for_sleeper`

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        """Seconds on the timeline its sleeps run on (`now()`'s, unless a test steps `now()` alone)."""
        return self._now.timestamp()

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + timedelta(seconds=seconds), next(self._order), future, seconds))
        self._slept.set()
        await future

    @property
    def sleepers(self) -> int:
        """Sleeps still waiting (cancelled ones excluded)."""
        return sum(1 for _, _, f, _ in self._sleepers if not f.done())

    async def wait_for_sleeper(self, seconds: float) -> None:
        """Return once some task is asleep for exactly `seconds`: a test that must move time past a
        sleep started out of its sight (an HTTP retry's backoff, say) waits here for it to begin."""
        while True:
            self._slept.clear()
            if any(not f.done() and s == seconds for _, _, f, s in self._sleepers):
                return
            await self._slept.wait()

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking due sleepers in order and letting the woken code run."""
        target = self._now + timedelta(seconds=seconds)
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future, _ = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
                await settle()
        self._now = target
        await settle()


def monotonic(clock: Clock) -> float:
    """Seconds on the clock `clock.sleep` runs on, to measure how long a wait has run: its `monotonic()`
    (SystemClock: the event loop's; ManualClock: its own), or `now()` for a clock given to the library
    without one (its sleeps can only run on that). Never the wall clock beside a monotonic sleep: stepped
    back an hour, a question waiting 5 minutes said "64 minutes 59 seconds left"."""
    own = getattr(clock, "monotonic", None)
    if callable(own):
        return float(own())
    return clock.now().timestamp()


async def settle(rounds: int = 50) -> None:
    """Let ready tasks run: yield to the event loop a number of times (no wall-clock waiting)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
