"""A background worker that does items one at a time, sleeps until signalled or a timeout, and backs
off when its model fails: the shape both summarizers share.

`step()` handles one item and says whether there was one. When nothing is left the worker rests
until `notify()` or `idle_seconds` on the clock; a step that raises (the model is down, times out,
rate-limits) makes it wait 1, 2, 4 … up to `MAX_BACKOFF_SECONDS` and try again, ignoring signals
meanwhile so a busy chat cannot hammer a failing model. The item that failed is tried after every
other waiting item (`fails_on`, `turn`), and given up when it is the item, not the model, that
fails. Nothing here ever touches a turn: a worker failure only delays summaries. Time passes
through the injected clock (tests advance a ManualClock). Every change of state or count is
signalled on a condition, so tests (and tools) wait for the state they expect with `wait_until` /
`wait_idle` instead of polling `status()`. Logs name the error class, never the text being summarized.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from klaw.disk_trouble import damaged_database, damaged_words
from klaw.llm.errors import LlmBadRequestError, LlmMalformedResponseError, LlmTimeoutError
from klaw.memory.background_task import rest, stop_task
from klaw.memory.embedding_queue import QueueClock, describe_error
from klaw.memory.summaries.prompts import EmptySummaryError

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 300.0
# Tries of one item the model keeps rejecting before it is given up for good (an empty answer: one).
MAX_ATTEMPTS = 3
# Timeouts of one item before it is given up, counted only once the model has answered another
# request since the item's first timeout (a model slow or down for everything is waited for):
# docs/decisions/261-a-summary-that-times-out-stops-no-other.md.
MAX_TIMEOUTS = 3
# Errors about this item rather than the model's health: retrying cannot help forever.
ITEM_ERRORS = (LlmBadRequestError, LlmMalformedResponseError, EmptySummaryError)


def backoff_seconds(failures: int) -> float:
    """1, 2, 4, … seconds after the 1st, 2nd, 3rd … consecutive failure, at most 5 minutes."""
    return min(float(2 ** max(failures - 1, 0)), MAX_BACKOFF_SECONDS)


class WorkerState(StrEnum):
    STOPPED = "stopped"
    IDLE = "idle"
    WORKING = "working"
    BACKING_OFF = "backing off"


@dataclass(frozen=True)
class WorkerStatus:
    name: str
    state: WorkerState
    completed: int  # items done since the engine started
    failed: int  # failed attempts since the engine started (each is tried again later)
    given_up: int  # items the model gave no summary of, kept verbatim instead (summaries/verbatim.py)
    last_error: str | None  # error class and short reason, never content
    retry_at: datetime | None  # when a backing-off worker tries again


class BackgroundWorker(ABC):
    def __init__(self, name: str, clock: QueueClock, *, idle_seconds: float) -> None:
        self.name = name
        self._clock = clock
        self._idle_seconds = idle_seconds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._state = WorkerState.STOPPED
        self._changed = asyncio.Condition()  # notified on every state or count change
        self._failures = 0
        self._retry_at: datetime | None = None
        self.completed = 0
        self.failed = 0
        self.given_up = 0
        self.last_error: str | None = None
        self._rejections: dict[int, int] = {}  # item id → rejections in a row
        self._timeouts: dict[int, tuple[int, int]] = {}  # item id → (timeouts, answers before its first)
        self._answers = 0  # requests the model answered (anything, in time) since the engine started
        self._set_back: dict[int, int] = {}  # item id → when it failed last (a count): tried after the others
        self._set_backs = 0

    @abstractmethod
    async def step(self) -> bool:
        """Handle one item; False when there is none. Raise to back off (the item is tried again)."""

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if not self.running:
            self._wake.set()  # first look for work left by an earlier run
            self._state = WorkerState.WORKING
            self._task = asyncio.create_task(self._run(), name=f"klaw-{self.name}")

    def notify(self) -> None:
        """New work may exist: look now instead of at the next timeout."""
        self._wake.set()

    def status(self) -> WorkerStatus:
        state = self._state if self.running else WorkerState.STOPPED
        retry_at = self._retry_at if state is WorkerState.BACKING_OFF else None
        return WorkerStatus(self.name, state, self.completed, self.failed, self.given_up, self.last_error, retry_at)

    @property
    def resting(self) -> bool:
        """Stopped, or idle with no signal pending."""
        return not self.running or (self._state is WorkerState.IDLE and not self._wake.is_set())

    async def wait_idle(self) -> None:
        """Until the worker has done everything it can and rests (at once when stopped). For tests."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.resting)

    async def wait_until(self, predicate: Callable[[WorkerStatus], bool]) -> WorkerStatus:
        """Until `predicate(status())` holds, checked at once and after every state or count change;
        returns that status. For tests and tools that must see a change (backing off, the n-th failure,
        an item done) as it happens: the manual clock does not move by itself and the model answers over
        real HTTP, so there is no fixed moment to look, and polling would be timing. It waits forever if
        the state never comes: callers put a timeout around it."""
        async with self._changed:
            await self._changed.wait_for(lambda: predicate(self.status()))
            return self.status()

    async def _signal(self) -> None:
        """Wake `wait_idle` and `wait_until` to look again at the state and counts."""
        async with self._changed:
            self._changed.notify_all()

    async def aclose(self) -> None:
        """Stop. An item in flight is abandoned and done again after the next start."""
        task, self._task = self._task, None
        if task is None:
            return
        await stop_task(task, self.name)
        self._state = WorkerState.STOPPED
        await self._signal()

    def record_failure(self, exc: BaseException) -> None:
        self.failed += 1
        self.last_error = describe_error(exc)

    def answered(self) -> None:
        """The model answered a request in time (whatever it said): it is reachable and fast enough, so
        an item that times out while others are answered is the item's doing, not the model's."""
        self._answers += 1

    def fails_on(self, item: int, exc: Exception, what: str) -> bool:
        """`item`'s request failed with `exc`: True when the item is given up for good (the caller then
        keeps its own words as its summary, decision 250); False when it is tried again later, after the
        other items (the caller re-raises and the worker backs off). The same rule for both summarizers:

        - an empty answer: given up at once (the model's final word on the item, decision 250);
        - a bad request or malformed answer: at the `MAX_ATTEMPTS`-th (a proxy's passing 400 is not rare);
        - a timeout: at the `MAX_TIMEOUTS`-th, if the model answered anything since the item's first
          one (decision 261); a model that times out on everything is slow or down and is waited for;
        - anything else (connection refused, 5xx, 429, a key rejected): the model's health, never the
          item's: tried again however long it takes.

        An item tried again is set back behind every other waiting item, so one that keeps failing never
        holds up the rest (decision 261): before, it headed the queue and was the only one ever asked.
        """
        if isinstance(exc, ITEM_ERRORS):
            attempts = self._rejections.get(item, 0) + 1
            final = attempts >= MAX_ATTEMPTS or isinstance(exc, EmptySummaryError)
            self._rejections[item] = attempts
        elif isinstance(exc, LlmTimeoutError):
            attempts, answers_before = self._timeouts.get(item, (0, self._answers))
            attempts += 1
            final = attempts >= MAX_TIMEOUTS and self._answers > answers_before
            self._timeouts[item] = (attempts, answers_before)
        else:
            attempts, final = 0, False
        if not final:
            self._set_backs += 1
            self._set_back[item] = self._set_backs
            return False
        self._forget(item)
        self.record_failure(exc)
        self.given_up += 1
        log.warning(
            "%s %d: no summary from the model after %d attempt(s) (%s); its own words are kept as its summary",
            what,
            item,
            attempts,
            type(exc).__name__,
        )
        return True

    def turn(self, item: int) -> int:
        """Where `item` comes among the waiting ones: 0 unless it failed, then after those that did not,
        the one that failed longest ago first. Sort by `(turn(item), item)`."""
        return self._set_back.get(item, 0)

    def succeeded(self, item: int) -> None:
        """`item` went through: its earlier failures no longer count."""
        self._forget(item)

    def _forget(self, item: int) -> None:
        self._rejections.pop(item, None)
        self._timeouts.pop(item, None)
        self._set_back.pop(item, None)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._state = WorkerState.WORKING
            await self._signal()
            try:
                while await self.step():
                    await self._signal()  # an item done, given up or skipped: the counts may have moved
            except Exception as exc:
                self.record_failure(exc)
                if (reason := damaged_database(exc)) is not None:  # final: said once, not retried (decision 326)
                    self.last_error = damaged_words(self.name, reason)
                    log.error("%s", self.last_error)
                    self._state = WorkerState.STOPPED
                    await self._signal()
                    return
                self._failures += 1
                delay = backoff_seconds(self._failures)
                self._retry_at = self._clock.now() + timedelta(seconds=delay)
                self._state = WorkerState.BACKING_OFF
                log.warning("%s: %s; trying again in %.0f s", self.name, type(exc).__name__, delay)
                await self._signal()
                await self._clock.sleep(delay)
                continue
            self._failures = 0
            if self._wake.is_set():
                continue  # signalled while working: look again before resting
            self._state = WorkerState.IDLE
            await self._signal()
            await rest(self._wake, self._clock.sleep, self._idle_seconds)
