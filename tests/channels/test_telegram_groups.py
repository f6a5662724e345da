"""A Telegram group on the allow-list (python-telegram-bot against the fake Bot API, a real gateway and
engine, the fake OpenAI server): with `allowedUserIds` only the people listed are heard there, so another
member can neither approve a held tool nor have their words kept; without it the gateway warns at start."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from klaw.channels.telegram import PERSON_REFUSAL, TelegramChannel
from klaw.config import TelegramChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_telegram import ANA, TOKEN

FAMILY = -1001234567890  # a group: Telegram's group ids are negative
BOB = 5151


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(TOKEN) as fake:
        yield fake


def group_channel(fake: FakeTelegram, people: tuple[int, ...]) -> Any:
    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[TelegramChannel]:
        config = TelegramChannelConfig(
            enabled=True, allowed_chat_ids=(FAMILY,), allowed_user_ids=people, api_base_url=fake.base_url
        )
        return [TelegramChannel(config, TOKEN, commands=loaded.config.commands, poll_timeout=1)]

    return make


async def test_only_the_listed_person_approves_and_is_heard_in_a_group(telegram: FakeTelegram) -> None:
    async with running_stack(group_channel(telegram, (ANA,)), tools={"approval": ["file_write"]}) as stack:
        stack.server.reply_tool_calls([("file_write", {"path": "list.txt", "content": "milk, eggs"})])
        stack.server.reply_text("Saved your list.")
        telegram.push_text(FAMILY, "save my shopping list", from_id=ANA)
        await telegram.wait_for_sent(1)
        found = re.search(r"/approve ([0-9a-f]{4})", telegram.sent_to(FAMILY)[0])
        assert found is not None, telegram.sent_to(FAMILY)

        telegram.push_text(FAMILY, f"/approve {found.group(1)}", first_name="Bob", from_id=BOB)
        telegram.push_text(FAMILY, "my pin is 4711", first_name="Bob", from_id=BOB)
        await telegram.wait_for_sent(2)
        assert telegram.sent_to(FAMILY)[1] == PERSON_REFUSAL.format(user_id=BOB)  # once, not per message
        assert not (stack.home.workspace / "list.txt").exists()  # Bob's /approve did nothing

        telegram.push_text(FAMILY, f"/approve {found.group(1)}", from_id=ANA)
        await telegram.wait_for(lambda: "Saved your list." in telegram.sent_to(FAMILY))
        assert (stack.home.workspace / "list.txt").read_text(encoding="utf-8") == "milk, eggs"
        assert telegram.sent_to(FAMILY).count(PERSON_REFUSAL.format(user_id=BOB)) == 1
        segment = await stack.engine.store.segments.current(ChatRef("telegram", str(FAMILY)))
        stored = [m.content for m in await stack.engine.store.messages.window(segment.id, 50)]
        assert stored and not any("4711" in text for text in stored)
        assert "4711" not in stack.gateway.buffer.path.read_text(encoding="utf-8")


async def test_a_group_allowed_without_listed_people_is_warned_about(
    telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="klaw.channels.telegram")
    async with running_stack(group_channel(telegram, ())) as stack:
        stack.server.reply_text("Hi Bob.")
        telegram.push_text(FAMILY, "hello", first_name="Bob", from_id=BOB)
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(FAMILY) == ["Hi Bob."]  # everyone in an allowed group is heard, as before
    [warning] = [r.getMessage() for r in caplog.records if "allowedUserIds" in r.getMessage()]
    assert str(FAMILY) in warning and "/approve" in warning


async def test_a_group_is_told_which_channel_a_sent_message_came_from_not_which_chat(telegram: FakeTelegram) -> None:
    """adversary16: "From telegram:<id>" named the owner's private chat to every member of an allowed group;
    a group's heading names the channel only (decision 408)."""
    channels = {"telegram": {"enabled": True, "allowedChatIds": [FAMILY, ANA]}}
    async with running_stack(group_channel(telegram, (ANA,)), channels=channels) as stack:
        target = f"telegram:{FAMILY}"
        stack.server.reply_tool_calls([("message_send", {"target": target, "text": "Dinner at eight."})])
        stack.server.reply_text("Told the family.")
        await stack.engine.submit(ChatRef("telegram", str(ANA)), "tell the family: dinner at eight")
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(FAMILY) == ["From telegram\n\nDinner at eight."]
        assert telegram.sent[0].bold == ["From telegram"]
