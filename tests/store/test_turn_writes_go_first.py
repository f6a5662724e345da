"""A turn's own writes run ahead of the background work queued on the database thread (decision 382).

A person's message, its exchange's id and the reply are what a turn waits for; the embedding queue's
claims and vector puts and the summarizers' writes triggered by the turns before it queue on the same
thread. Here the thread is held while the embedding queue's claim is queued, then a person's message:
once released, the message is stored first (the claim, which came before it, already finds its
embedding job). On the old code the claim ran first and found only the older job. And a steady line of
other calls never starves the background: the call waiting behind them runs after at most
`AHEAD_IN_A_ROW` of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import apsw

from klaw.engine.clock import ManualClock
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.write_queue import AHEAD_IN_A_ROW
from tests.store.held_thread import thread_held
from tests.store.test_write_groups import HELD_SECONDS, T0, queued, said

T = TypeVar("T")
LATER = T0 + timedelta(days=36500)  # every embedding job due


async def test_a_persons_message_is_stored_before_the_background_work_queued_before_it(tmp_path: Path) -> None:
    clock = ManualClock(LATER)
    store = await SqliteStore.open(tmp_path / "klaw.db", clock=clock.now)
    chat = ChatRef("console", "alice")
    try:
        older = await store.messages.append(said(chat, 0), embed=True)  # a job due: the claim goes to the thread
        finished: list[str] = []

        async def tracked(name: str, work: Awaitable[T]) -> T:
            result = await work
            finished.append(name)
            return result

        async with thread_held(store, HELD_SECONDS):
            claim = asyncio.ensure_future(
                tracked("claim", store.embedding_jobs.claim_texts(clock.now(), 10, timedelta(1)))
            )
            await queued()
            message = asyncio.ensure_future(tracked("message", store.messages.append(said(chat, 1), embed=True)))
            await queued()
        await asyncio.gather(claim, message)

        assert finished == ["message", "claim"]
        stored = await message
        claimed = await claim
        assert {c.job.target_rowid for c in claimed} == {older.rowid, stored.rowid}
    finally:
        await store.aclose()


async def test_background_work_runs_between_the_conversations_calls_however_many_wait(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    order: list[str] = []

    def noted(name: str) -> Callable[[apsw.Connection], None]:
        def call(_connection: apsw.Connection) -> None:
            order.append(name)

        return call

    try:
        async with thread_held(store, HELD_SECONDS):
            calls = [asyncio.ensure_future(store.db.run(noted("background"), behind=True))]
            await queued()
            for n in range(3 * AHEAD_IN_A_ROW):
                calls.append(asyncio.ensure_future(store.db.run(noted(f"turn {n}"))))
            await queued(3 * AHEAD_IN_A_ROW)
        await asyncio.gather(*calls)

        assert order.index("background") == AHEAD_IN_A_ROW
        assert [name for name in order if name != "background"] == [f"turn {n}" for n in range(3 * AHEAD_IN_A_ROW)]
    finally:
        await store.aclose()
