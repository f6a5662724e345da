"""An in-process channel's reply is noted as shown after the turn, not in it (decision 229): the turn
(its chat and its model slot) does not wait for that write, the notes that come meanwhile go in one
write, and none is lost at shutdown, so a clean restart offers nothing again."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw.engine.delivery import Delivery, Outbound
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import running_engine

CHAT = ChatRef("console", "me")


async def test_delivery_returns_before_the_confirmation_is_written_and_later_ones_go_together() -> None:
    written: list[list[str]] = []
    release = asyncio.Event()

    async def confirm(record_ids: Sequence[str]) -> int:
        await release.wait()  # the database thread busy with something else
        written.append(list(record_ids))
        return len(record_ids)

    async def show(outbound: Outbound) -> None:
        shown.append(outbound.id)

    shown: list[str | None] = []
    delivery = Delivery(confirm=confirm)
    delivery.register("console", show)
    async with asyncio.timeout(60):  # on the old code the first delivery waits for the write: never released
        for n in range(3):
            await delivery.deliver(Outbound(CHAT, f"answer {n}", f"m{n}", "reply", id=f"r{n}"))
            await asyncio.sleep(0)  # the first note's write has started (and waits) before the others come
    assert shown == ["r0", "r1", "r2"] and written == []
    release.set()
    await delivery.settle()
    assert written == [["r0"], ["r1", "r2"]]


async def test_a_reply_shown_just_before_shutdown_is_not_offered_again(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        reply = await h.turn("what is a quokka")
        assert reply.id is not None
    store = await SqliteStore.open(h.home.database_file("klaw.db"))
    try:
        assert await store.exchanges.undelivered() == []
    finally:
        await store.aclose()
