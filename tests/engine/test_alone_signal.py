"""The engine's "alone" signal (decision 533): the store asks it before a read, and it is true only while at
most one turn is in flight and no read is on the read threads. A chat's turn held in the model counts as
one (alone); a second chat's turn held beside it makes two (not alone); both answered, alone again. A read
held on a read thread makes it false too. Outside an engine (a command's store) it is never true."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, Harness, running_engine

OTHER = ChatRef("console", "other")


def _db(h: Harness) -> SqliteStore:
    store = h.engine.store
    assert isinstance(store, SqliteStore)
    return store


async def _held_turn(h: Harness, text: str, chat: ChatRef) -> asyncio.Event:
    """`chat`'s turn under way, its model's answer held until the returned event is set."""
    asked, released = asyncio.Event(), asyncio.Event()

    async def hang() -> None:
        asked.set()
        await released.wait()

    h.server.reply_text(f"answer to {text}", before=hang)
    await h.say(text, chat)
    await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
    await asyncio.wait_for(asked.wait(), 30)
    return released


async def test_alone_with_one_turn_not_with_two_nor_beside_a_read(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        db = _db(h).db
        await h.turn("hello there")
        assert db.alone  # nothing in flight

        first = await _held_turn(h, "the first chat's question", CHAT)
        assert h.engine.processor.turns_under_way == 1
        assert db.alone  # its own turn alone

        second = await _held_turn(h, "the other chat's question", OTHER)
        assert h.engine.processor.turns_under_way == 2
        assert not db.alone  # two chats' turns in flight

        first.set()
        second.set()
        await h.wait_for_replies(3)
        await _until(lambda: h.engine.processor.turns_under_way == 0)
        assert db.alone

        entered, release = threading.Event(), threading.Event()

        def held_read(connection: object) -> int:
            entered.set()
            release.wait(30)
            return 1

        reading = asyncio.ensure_future(db.read(held_read))
        await asyncio.to_thread(entered.wait, 30)
        assert not db.alone  # a read on the read threads
        release.set()
        assert await reading == 1
        assert db.alone


async def test_a_store_outside_an_engine_is_never_alone(store: SqliteStore) -> None:
    assert not store.db.alone


async def _until(condition: Callable[[], bool]) -> None:
    """Poll: a turn's task ends a moment after its reply is delivered (nothing signals it)."""
    deadline = asyncio.get_running_loop().time() + 30
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the turns did not end"
        await asyncio.sleep(0.01)
