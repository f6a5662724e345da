"""A reply the full database cannot store closes its exchange once: the log took the reply and its
close before the database refused them, so the turn's failure writes no second close (failed, after
completed), the person is told the disk is full and what to do, and the next start stores the reply,
sends it, and warns of nothing (docs/decisions/262-one-close-per-exchange-on-a-full-disk.md).

SQLite reports SQLITE_FULL for real: `PRAGMA max_page_count` caps klaw.db at the pages it has, while the
model writes its reply, as a full disk does (tests/engine/test_full_disk.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

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


async def test_a_reply_the_full_database_refused_closes_its_exchange_once_and_the_apology_names_the_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    delivered: list[Outbound] = []

    async def record(outbound: Outbound) -> None:
        delivered.append(outbound)

    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url)
        clock = ManualClock()
        engine = await Engine.start(home, config, clock=clock, listen=False)
        engine.delivery.set_fallback(record)
        try:

            async def disk_fills() -> None:
                await cap_database(engine, 0)

            server.reply_text(LONG_TEXT, before=disk_fills)  # a reply needing pages the database cannot have
            await engine.submit(CHAT, "write me a long story")
            await engine.processor.drain(timeout_seconds=30)  # a deadline as a safety net only
        finally:
            await cap_database(engine, None)  # space is back: the engine stops as usual
            await engine.shutdown(timeout_seconds=5)
        [apology] = delivered
        assert apology.kind == "error"
        assert "the disk is full" in apology.text and "Free some space" in apology.text
        assert closes_in_log(home) == [ExchangeStatus.COMPLETED.value]

        delivered.clear()
        with caplog.at_level(logging.WARNING):
            engine = await Engine.start(home, config, clock=clock, listen=False)  # a new connection: no cap
        engine.delivery.set_fallback(record)
        try:
            await engine.processor.redeliver()  # as when a gateway says hello: the start found no route
            [turn] = await engine.chats.turns(CHAT)
            assert turn.status == "completed"
        finally:
            await engine.shutdown(timeout_seconds=5)
    assert not [r for r in caplog.records if "found no open exchange" in r.getMessage()]
    assert [(o.kind, o.text) for o in delivered] == [("reply", LONG_TEXT)]
