"""newcomer9: a Telegram outage while polling wrote a WARNING line at every retry (every 60 s at the cap,
~1,440 lines a day), and when Telegram answered again nothing at WARNING said so: the log's last Telegram
line still read "could not reach Telegram … retrying in 60 s". Now the outage is said once, reminded each
hour, and its end said at WARNING with how long it lasted. Two hours pass on a clock whose sleeps return
at once; Telegram is the fake Bot API, stopped and started again on its port."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from klaw.channels.telegram import TelegramChannel
from klaw.config import TelegramChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_serve_telegram_unreachable import free_port

TOKEN = "123456:SECRET-bot-token-value"
ANA = 4242


class SkippingClock:
    """Time passes only by sleeping, and a sleep passes at once: hours of retries in a moment."""

    def __init__(self, hours: float) -> None:
        self.start = self._now = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
        self._end = self.start + timedelta(hours=hours)
        self.passed = asyncio.Event()  # set once `hours` have passed

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        if self._now >= self._end:
            self.passed.set()
        await asyncio.sleep(0.001)


async def test_an_outage_is_said_once_an_hour_and_its_end_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="klaw.channels.telegram")
    clock = SkippingClock(hours=2.5)
    back = asyncio.Event()

    class Back(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "again after" in record.getMessage():
                back.set()

    logging.getLogger("klaw.channels.telegram").addHandler(handler := Back())
    port = free_port()
    first = FakeTelegram(TOKEN, port=port)
    await first.__aenter__()

    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[Any]:
        config = TelegramChannelConfig(enabled=True, allowed_chat_ids=(ANA,), api_base_url=first.base_url)
        return [TelegramChannel(config, TOKEN, commands=loaded.config.commands, clock=clock, poll_timeout=1)]

    async with running_stack(make) as stack:
        stack.server.reply_text("Hello.")
        first.push_text(ANA, "hi")
        await first.wait_for_sent(1)
        await first.__aexit__(None, None, None)  # Telegram goes away
        async with asyncio.timeout(120):  # a safety net: the clock's hours pass as fast as retries fail
            await clock.passed.wait()
        async with FakeTelegram(TOKEN, port=port):  # and comes back
            async with asyncio.timeout(60):
                await back.wait()
            records = list(caplog.records)  # before the stack's end stops the fake again
    logging.getLogger("klaw.channels.telegram").removeHandler(handler)
    said = [r.getMessage() for r in records if r.levelno >= logging.WARNING and r.name.endswith("telegram")]
    retries = [r for r in records if r.levelno == logging.INFO and "getUpdates failed" in r.getMessage()]
    assert len(retries) > 100  # each retry is still there with --verbose
    assert said[0].startswith("telegram: getUpdates failed (") and "said again hourly" in said[0], said
    assert sum("still out of reach after" in line for line in said) == 2, said  # after 1 h and after 2 h
    assert len(said) == 4, said
    assert said[-1].startswith("telegram: reached Telegram again after 2 h"), said
    assert "SECRET" not in caplog.text and "hi" not in caplog.text.split()
