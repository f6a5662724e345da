"""adversary30: an update python-telegram-bot reads but whose fields have the wrong type (text that is a
number or a list, no chat, a chat id sent as the string "42") raised in the channel's handling, and the poll
loop took that for a full disk: it logged an ERROR every second, never confirmed the update, and every later
message of every allowed chat waited behind it for ever. A string chat id "42" was refused as a stranger
and the refusal sent to allowed chat 42. Now such an update is skipped and confirmed, said in the log by
field and type only, nothing is sent for it, and the next message is answered; only a failure to store
(the disk) is retried (decision 515)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from klaw import command_syntax
from klaw.gateway.buffer import BufferUnavailable, InboundBuffer
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_telegram import ANA, TOKEN, channel_factory

SECRET = "SECRETWORD-7731"


def message(**fields: Any) -> dict[str, Any]:
    """Ana's message as Telegram sends it, with `fields` put in its place (None: the field left out)."""
    base: dict[str, Any] = {
        "message_id": 900,
        "from": {"id": ANA, "is_bot": False, "first_name": "Ana"},
        "chat": {"id": ANA, "type": "private", "first_name": "Ana"},
        "date": int(time.time()),
        "text": SECRET,
    }
    base.update(fields)
    return {key: value for key, value in base.items() if value is not None}


UNFIT = {
    "text a number": (message(text=12345), "its text is an int, not a string"),
    "text a list": (message(text=[SECRET, "b"]), "its text is a list, not a string"),
    "text a mapping": (message(text={SECRET: 1}), "its text is a dict, not a string"),
    "no chat": ({"message_id": 5, "date": 1, "text": SECRET}, "its message has no chat"),
    "chat id a string": (
        message(chat={"id": str(ANA), "type": "private", "first_name": "Ana"}),
        "its chat id is a str, not a whole number",
    ),
    "chat id true": (message(chat={"id": True, "type": "private"}), "its chat id is a bool, not a whole number"),
    "chat id too large": (message(chat={"id": 2**70, "type": "private"}), "its chat id is a number too large"),
    "sender id a string": (
        message(**{"from": {"id": str(ANA), "is_bot": False, "first_name": "Ana"}}),
        "its sender's id is a str, not a whole number",
    ),
    "message id a fraction": (message(message_id=1.5), "its message_id is a float, not a whole number"),
    # read by no library: skipped as decision 487's, in the same batch as the good message after it
    "entities a string": (message(text="/new", entities="abc"), "the library could not read it"),
    "a reply with no date": (message(reply_to_message={"message_id": "x"}), "the library could not read it"),
}


@pytest.mark.parametrize("case", list(UNFIT))
async def test_an_unfit_update_is_skipped_and_the_chats_go_on(case: str, caplog: pytest.LogCaptureFixture) -> None:
    bad_message, said = UNFIT[case]
    caplog.set_level(logging.DEBUG)
    async with FakeTelegram(TOKEN) as fake, running_stack(channel_factory(fake)) as stack:
        stack.server.reply_text("Hello again.")
        bad = fake.push_raw(bad_message)
        fake.push_text(ANA, "plain hello after it")
        await fake.wait_for(lambda: len(fake.sent_to(ANA)) == 1, seconds=30)
        assert fake.sent_to(ANA) == ["Hello again."]  # no refusal, no notice for the bad one: nothing sent
        assert [m.chat_id for m in fake.sent] == [ANA]
        assert all(u["update_id"] > bad for u in fake.updates)  # confirmed past: never fetched again
    records = caplog.records
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in records)
    assert SECRET not in logged
    skipped = [r.getMessage() for r in records if f"skipped update {bad}:" in r.getMessage()]
    assert len(skipped) == 1 and said in skipped[0] and "its message is lost" in skipped[0], skipped
    assert not [r.getMessage() for r in records if r.levelno >= logging.ERROR and r.name.startswith("klaw")]


async def test_a_bug_one_update_meets_skips_it_not_every_chat(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception klaw did not foresee while handling one update (a bug its content met) is not a full
    disk: the update is skipped, said as a bug by its class, and the next message is answered."""
    caplog.set_level(logging.INFO, logger="klaw.channels.telegram")
    real = command_syntax.for_this_bot

    def breaks_on_the_secret(text: str, username: str) -> str | None:
        if SECRET in text:
            raise IndexError("a bug")
        return real(text, username)

    monkeypatch.setattr("klaw.channels.telegram.for_this_bot", breaks_on_the_secret)
    async with FakeTelegram(TOKEN) as fake, running_stack(channel_factory(fake)) as stack:
        stack.server.reply_text("Still here.")
        bad = fake.push_raw(message())
        fake.push_text(ANA, "are you there")
        await fake.wait_for(lambda: len(fake.sent_to(ANA)) == 1, seconds=30)
        assert all(u["update_id"] > bad for u in fake.updates)
    said = [r.getMessage() for r in caplog.records if f"update {bad}" in r.getMessage()]
    assert said == [
        f"telegram: skipped update {bad}: handling it raised IndexError, a bug worth reporting; its message is lost"
    ]


async def test_a_message_the_disk_refuses_is_fetched_again_and_answered(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the line: klaw cannot store now (a full disk) is retried, not skipped."""
    caplog.set_level(logging.INFO, logger="klaw.channels.telegram")
    real = InboundBuffer.add
    refusals = [BufferUnavailable("the gateway could not save this message (No space left on device)")]

    async def full_once(self: InboundBuffer, frame: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return await real(self, frame)

    monkeypatch.setattr(InboundBuffer, "add", full_once)
    async with FakeTelegram(TOKEN) as fake, running_stack(channel_factory(fake)) as stack:
        stack.server.reply_text("Saved at last.")
        fake.push_text(ANA, "keep this one")
        await fake.wait_for(lambda: len(fake.sent_to(ANA)) == 1, seconds=30)
        assert fake.sent_to(ANA) == ["Saved at last."]
    said = [r.getMessage() for r in caplog.records]
    assert any("could not take update" in line and "No space left" in line for line in said), said
    assert not any("skipped update" in line for line in said), said
