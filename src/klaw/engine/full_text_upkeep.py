"""The engine merging klaw.db's full-text index in the background, one bounded step at a time.

Bulk appends and FTS5's own automerge leave the index in ~20-25 segments, and each search reads
them all (`store/sqlite/fts_merge.py`, decision 251). While the engine runs, this task asks every
`interval` seconds whether a merge step has work; while steps find work it runs them one after the
other with `pause` seconds between, each a transaction of its own on the database thread (a turn's
write waits for one step at most: ~7 ms of CPU at 1M messages, ~0.25 s for the step that ends a large
merge and frees its segments' pages), then rests again. A home that holds nothing to
merge pays one small write transaction a minute. No step starts while a chat's turn is under way
(`busy`): measured at 1k messages, steps beside the turns cost a sequential turn ~1–2 ms, every
context layer alike; the merge waits for a pause between turns instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import apsw

from klaw.memory.background_task import stop_task
from klaw.store.protocol import StorageError
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.fts_merge import merge_step

log = logging.getLogger(__name__)

CHECK_SECONDS = 60.0
STEP_PAUSE_SECONDS = 0.1  # between two steps: turns' writes go first, the merge takes ≤ ~10 % of a core


class FullTextUpkeep:
    """Merges the full-text index in the background while the engine runs (start, stop)."""

    def __init__(
        self,
        db: SqliteDatabase,
        *,
        interval: float = CHECK_SECONDS,
        pause: float = STEP_PAUSE_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        """`busy`: whether a turn is under way now (the processor's count); no step starts while it is."""
        self._db = db
        self._busy = busy
        self._interval = interval
        self._pause = pause
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self.steps = 0  # steps that merged something, since start

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="klaw-full-text-upkeep")

    async def stop(self) -> None:
        if self._task is not None:
            await stop_task(self._task, "the full-text index upkeep")
            self._task = None

    async def _run(self) -> None:
        while not self._db.closed:
            try:
                while await self._turns_paused() and await self._db.run(merge_step, behind=True):
                    self.steps += 1
                    await self._sleep(self._pause)
            except (apsw.Error, StorageError) as exc:  # a slower search, never a failed turn: tried again later
                log.warning("full-text index upkeep: a merge step failed (%s)", type(exc).__name__)
            await self._sleep(self._interval)

    async def _turns_paused(self) -> bool:
        """Wait, a pause at a time, until no turn is under way; always True (a step may start)."""
        while self._busy() and not self._db.closed:
            await self._sleep(self._pause)
        return not self._db.closed
