"""adversary28: one update python-telegram-bot cannot read (a `date` of 10**12, year 33658) stopped
Telegram for good: `get_updates` raised a ValueError the poll loop did not catch, the polling task died
unseen, getUpdates was never called again, and the library's CRITICAL line quoted the message's text.
Now the unreadable update is skipped (confirmed past), said in the log without its content, and the next
message is answered; a poll loop that dies anyway is said and started again (decision 487)."""

from __future__ import annotations

import logging

import pytest

from klaw.channels.telegram_outage import TelegramOutage
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_telegram import ANA, TOKEN, channel_factory

SECRET = "date far in the future, my pin is 7731"


def push_unreadable(fake: FakeTelegram) -> int:
    """A message whose date no `datetime` holds: the library's `Update.de_list` raises ValueError."""
    update_id = fake._next_update
    message = {
        "message_id": 900,
        "from": {"id": ANA, "is_bot": False, "first_name": "Ana"},
        "chat": {"id": ANA, "type": "private", "first_name": "Ana"},
        "date": 10**12,
        "text": SECRET,
    }
    fake.updates.append({"update_id": update_id, "message": message})
    fake._next_update += 1
    return update_id


async def test_an_update_the_library_cannot_read_is_skipped_and_the_next_is_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with FakeTelegram(TOKEN) as fake, running_stack(channel_factory(fake)) as stack:
        stack.server.reply_text("Hello again.")
        bad = push_unreadable(fake)
        fake.push_text(ANA, "plain hello after it")
        await fake.wait_for(lambda: len(fake.sent_to(ANA)) == 1, seconds=30)
        assert fake.sent_to(ANA) == ["Hello again."]
        assert all(u["update_id"] > bad for u in fake.updates)  # confirmed past: never fetched again
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "pin is 7731" not in logged and "far in the future" not in logged
    skipped = [r.getMessage() for r in caplog.records if f"update {bad}" in r.getMessage()]
    assert skipped and "could not read" in skipped[0], skipped


async def test_a_poll_loop_that_dies_is_said_and_polls_again(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever escapes the loop (here a bug standing in the outage bookkeeping) is logged and the loop
    started again: before, the task ended and nothing said so while `klaw serve` ran on."""
    caplog.set_level(logging.INFO, logger="klaw.channels.telegram")
    broken = [True]
    real = TelegramOutage.reached

    def once_broken(self: TelegramOutage, what: str) -> None:
        if broken:
            broken.clear()
            raise RuntimeError("a bug")
        real(self, what)

    monkeypatch.setattr(TelegramOutage, "reached", once_broken)
    async with FakeTelegram(TOKEN) as fake, running_stack(channel_factory(fake)) as stack:
        stack.server.reply_text("Still here.")
        fake.push_text(ANA, "are you there")
        await fake.wait_for(lambda: len(fake.sent_to(ANA)) == 1, seconds=30)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("polling stopped" in line and "RuntimeError" in line for line in said), said
