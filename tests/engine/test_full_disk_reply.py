"""A reply the full database cannot store: the log took the reply and its close before the database refused them.
The person is told once that the answer waits for room; once there is room the engine stores both from their
logged lines and sends the reply, while it runs (adv28b, decision 500: before, an apology said to send the message
again, and only the next start stored and sent the answer). An engine stopped while the disk is still full leaves
them to the next start, which stores the reply, sends it, and warns of nothing: one close per exchange
(docs/decisions/262-one-close-per-exchange-on-a-full-disk.md).

SQLite reports SQLITE_FULL for real: `PRAGMA max_page_count` caps klaw.db at the pages it has, while the
model writes its reply, as a full disk does (tests/engine/test_full_disk.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from klaw.config import EngineConfig
from klaw.engine.clock import ManualClock
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ExchangeStatus
from tests.engine.harness import CHAT, engine_config
from tests.engine.test_full_disk import LONG_TEXT, cap_database

EXCHANGE_CLOSE = "exchange_close"


def closes_in_log(home: KlawHome) -> list[str]:
    """The status of every exchange_close line in the home's conversation log, in order."""
    return [
        record["metadata"]["status"]
        for path in sorted(home.conversations.rglob("*.jsonl"))
        for record in map(json.loads, path.read_text().splitlines())
        if record.get("type") == EXCHANGE_CLOSE
    ]


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    """A home `klaw init` made."""
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    return home


async def _started(home: KlawHome, config: EngineConfig, clock: ManualClock, delivered: list[Outbound]) -> Engine:
    """An engine without a socket: what it sends goes to its delivery's fallback, kept in `delivered`."""

    async def record(outbound: Outbound) -> None:
        delivered.append(outbound)

    engine = await Engine.start(home, config, clock=clock, listen=False)
    engine.delivery.set_fallback(record)
    return engine


async def _a_long_reply_fills_the_disk(engine: Engine, server: FakeOpenAiServer, clock: ManualClock) -> None:
    """A message whose reply needs pages the database cannot have (the cap set as the model answers), until
    the turn waits for room the first time."""

    async def disk_fills() -> None:
        await cap_database(engine, 0)

    server.reply_text(LONG_TEXT, before=disk_fills)
    await engine.submit(CHAT, "write me a long story")
    await clock.advance(engine.config.processing.debounce_ms / 1000)
    await asyncio.wait_for(clock.wait_for_sleeper(1.0), 30)


async def test_a_reply_the_full_database_refused_is_stored_and_sent_once_there_is_room(
    home: KlawHome, caplog: pytest.LogCaptureFixture
) -> None:
    delivered: list[Outbound] = []
    async with FakeOpenAiServer() as server:
        clock = ManualClock()
        engine = await _started(home, engine_config(server.base_url), clock, delivered)
        try:
            await _a_long_reply_fills_the_disk(engine, server, clock)
            [told] = delivered
            assert told.kind == "notice" and told.text.startswith("Your answer is written but not saved yet: no space")
            assert LONG_TEXT[:30] not in told.text
            for seconds in (1.0, 2.0, 4.0):  # still full: tried again, nothing more said
                await clock.advance(seconds)
            assert [o.kind for o in delivered] == ["notice"]

            await cap_database(engine, None)  # space is back
            await clock.advance(10.0)
            await engine.processor.drain(timeout_seconds=30)  # a deadline as a safety net only
            assert [(o.kind, o.text) for o in delivered[1:]] == [("reply", LONG_TEXT)]
            [turn] = await engine.chats.turns(CHAT)
            assert turn.status == "completed"
        finally:
            await cap_database(engine, None)
            await engine.shutdown(timeout_seconds=5)
    assert closes_in_log(home) == [ExchangeStatus.COMPLETED.value]
    assert not [r for r in caplog.records if "found no open exchange" in r.getMessage()]


async def test_a_reply_still_unsaved_at_shutdown_is_stored_and_sent_by_the_next_start_once(
    home: KlawHome, caplog: pytest.LogCaptureFixture
) -> None:
    delivered: list[Outbound] = []
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url)
        clock = ManualClock()
        engine = await _started(home, config, clock, delivered)
        try:
            await _a_long_reply_fills_the_disk(engine, server, clock)
        finally:
            await engine.shutdown(timeout_seconds=1)  # the disk still full: the turn is stopped
        assert delivered[0].kind == "notice"
        assert "reply" not in [o.kind for o in delivered]
        assert closes_in_log(home) == [ExchangeStatus.COMPLETED.value]

        delivered.clear()
        with caplog.at_level(logging.WARNING):
            engine = await _started(home, config, clock, delivered)  # a new connection: no cap
        try:
            await engine.processor.resuming.redeliver()  # as when a gateway says hello: the start found no route
            [turn] = await engine.chats.turns(CHAT)
            assert turn.status == "completed"
        finally:
            await engine.shutdown(timeout_seconds=5)
    assert not [r for r in caplog.records if "found no open exchange" in r.getMessage()]
    assert closes_in_log(home) == [ExchangeStatus.COMPLETED.value]
    assert [(o.kind, o.text) for o in delivered] == [("reply", LONG_TEXT)]
