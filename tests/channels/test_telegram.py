"""The Telegram channel end to end: python-telegram-bot against a local fake Bot API, a real gateway
and engine, and the fake OpenAI server. Allow-list, reply splitting, commands, typing, and quiet logs."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telegram.warnings import PTBDeprecationWarning

from klaw.channels.telegram import NOT_TAKEN, NOT_TEXT, REFUSAL, TelegramChannel
from klaw.channels.telegram_split import MAX_REPLY_PARTS
from klaw.config import TelegramChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack

TOKEN = "123456:SECRET-bot-token-value"
ANA = 4242
STRANGER = 999


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(TOKEN) as fake:
        yield fake


def channel_factory(fake: FakeTelegram) -> Any:
    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[TelegramChannel]:
        config = TelegramChannelConfig(enabled=True, allowed_chat_ids=(ANA,), api_base_url=fake.base_url)
        return [TelegramChannel(config, TOKEN, commands=loaded.config.commands, poll_timeout=1)]

    return make


async def test_an_allowed_chat_gets_the_reply_with_a_typing_indicator(telegram: FakeTelegram) -> None:
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text("Hello Ana, nice to meet you.")
        telegram.push_text(ANA, "hi there")
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(ANA) == ["Hello Ana, nice to meet you."]
        assert (ANA, "typing") in telegram.actions
        assert {"getMe", "getUpdates", "sendMessage", "sendChatAction"} <= set(telegram.calls)


async def test_unknown_chats_get_one_refusal_and_nothing_is_stored(telegram: FakeTelegram) -> None:
    async with running_stack(channel_factory(telegram)) as stack:
        telegram.push_text(STRANGER, "let me in")
        telegram.push_text(STRANGER, "please, my secret is 1234")
        telegram.push_text(ANA, "hello")
        await telegram.wait_for(lambda: len(telegram.sent_to(ANA)) == 1)
        assert telegram.sent_to(STRANGER) == [REFUSAL.format(chat_id=STRANGER)]  # once, not per message
        assert not telegram.updates or all(u["message"]["chat"]["id"] == ANA for u in telegram.updates)
        assert await stack.engine.chats.sessions(ChatRef("telegram", str(STRANGER))) == []
        assert await stack.engine.chats.sessions(ChatRef("telegram", str(ANA)))
        assert not any(str(STRANGER) in path.name for path in stack.home.conversations.iterdir())
        assert all(frame.chat_id == str(ANA) for frame in stack.gateway.buffer.pending())
        buffered = stack.gateway.buffer.path.read_text(encoding="utf-8")
        assert "1234" not in buffered and "let me in" not in buffered


async def test_a_message_klaw_never_takes_is_answered_once_and_the_next_one_gets_through(
    telegram: FakeTelegram,
) -> None:
    """adversary12: a lone surrogate made the gateway refuse the text, which the poll loop took for a full
    disk: the update stayed unconfirmed, was fetched again every second, and every later message waited."""
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text("Got it.")
        telegram.push_text(ANA, "half an emoji \ud83d here")
        telegram.push_text(ANA, "hello after that")
        await telegram.wait_for(lambda: len(telegram.sent_to(ANA)) == 2)
        refusal, reply = telegram.sent_to(ANA)
        assert refusal.startswith(NOT_TAKEN.format(problem="holds a lone surrogate")[:-1])
        assert "remove it" in refusal
        assert reply == "Got it."
        await telegram.wait_for(lambda: not telegram.updates)  # both confirmed: never fetched again
        assert stack.server.requests[-1].body["messages"][-1]["content"] == "hello after that"


async def test_strangers_rate_limited_refusals_do_not_hold_the_owner_back(telegram: FakeTelegram) -> None:
    """adversary12: refusals were sent inside the poll loop, each waiting through Telegram's "retry after"
    up to three times; the owner's message waited behind every stranger (here: an hour each)."""
    strangers = [STRANGER, STRANGER + 1, STRANGER + 2]
    telegram.retry_after.update(dict.fromkeys(strangers, 3600))
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text("Hello Ana.")
        for stranger in strangers:
            telegram.push_text(stranger, "let me in")
        telegram.push_text(ANA, "hello")
        await telegram.wait_for(lambda: telegram.sent_to(ANA) == ["Hello Ana."])
        assert all(telegram.sent_to(stranger) == [] for stranger in strangers)


@pytest.mark.parametrize("opted", [None, "false"], ids=["as-installed", "person-opted-out"])
async def test_a_reply_waits_out_telegrams_retry_after_without_a_deprecation_warning(
    telegram: FakeTelegram, recwarn: pytest.WarningsRecorder, monkeypatch: pytest.MonkeyPatch, opted: str | None
) -> None:
    """fh9: python-telegram-bot 22.2 warned (PTBDeprecationWarning: `retry_after` becomes a timedelta) as it
    made each RetryAfter and as the channel read it. The channel opts in to the timedelta (PTB_TIMEDELTA);
    a person who set PTB_TIMEDELTA=false keeps the int, and the wait is read either way."""
    if opted is None:
        monkeypatch.delenv("PTB_TIMEDELTA", raising=False)
    else:
        monkeypatch.setenv("PTB_TIMEDELTA", opted)
    telegram.retry_after[ANA] = 1
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text("Hello after the wait.")
        telegram.push_text(ANA, "hello")
        await telegram.wait_for(lambda: "sendMessage" in telegram.calls)  # refused: retry after 1 s
        del telegram.retry_after[ANA]
        await telegram.wait_for(lambda: telegram.sent_to(ANA) == ["Hello after the wait."])
    if opted is None:
        assert [str(w.message) for w in recwarn if issubclass(w.category, PTBDeprecationWarning)] == []


async def test_long_replies_are_split_at_telegram_limits(telegram: FakeTelegram) -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 300 for n in range(8)]  # ~12 000 characters
    long_reply = "\n\n".join(paragraphs)
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text(long_reply)
        telegram.push_text(ANA, "tell me a long story")
        await telegram.wait_for(lambda: len(telegram.sent_to(ANA)) >= 4)
        parts = telegram.sent_to(ANA)
        assert telegram.rejected == []  # the fake refuses anything over 4096, as Telegram does
        assert all(len(part) <= 4096 for part in parts)
        assert [p.split(":")[0] for p in "\n\n".join(parts).split("\n\n")] == [f"Paragraph {n}" for n in range(8)]
        assert "".join(parts).replace("\n", "") == long_reply.replace("\n", "")


async def test_a_runaway_reply_is_cut_after_eight_messages_and_kept_whole_in_the_log(telegram: FakeTelegram) -> None:
    """A model looping answered 1.89M characters: 462 messages in a minute (adversary27 M4). Now 8 parts and
    one closing message naming what was not sent; the log keeps the whole reply (decision 479)."""
    runaway = "I repeat myself. " * 12_000  # 204 000 characters: 50 messages before
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text(runaway)
        telegram.push_text(ANA, "tell me a story")
        await telegram.wait_for(lambda: any("Reply cut here" in part for part in telegram.sent_to(ANA)))
        await stack.gateway.stop()  # nothing more is on its way
        parts = telegram.sent_to(ANA)
        assert len(parts) == MAX_REPLY_PARTS + 1 and telegram.rejected == []
        sent = "".join(parts[:-1]).replace(" ", "")
        assert runaway.replace(" ", "").startswith(sent)
        not_sent = len(runaway.strip()) - len(" ".join(parts[:-1])) - 1  # less the space at the last cut
        assert parts[-1].startswith(f"(Reply cut here: {not_sent:,} more characters were not sent")
        logged = "".join(p.read_text() for p in stack.home.conversations.rglob("*.jsonl"))
        assert json.dumps(runaway.strip())[1:-1] in logged


async def test_a_task_answer_opens_with_its_label(telegram: FakeTelegram) -> None:
    """A scheduled task's or a subagent's answer arrives unasked: its first line says whose it is."""
    chat = ChatRef("telegram", str(ANA))
    async with running_stack(channel_factory(telegram)) as stack:
        await stack.engine.processor.inject(chat, "Rain after five.", {"source": "task", "task": "weather"})
        await stack.engine.processor.inject(
            chat, "Three sources found.", {"source": "task", "task": "research", "origin": "spawn"}
        )
        await telegram.wait_for(lambda: len(telegram.sent_to(ANA)) == 2)
        assert telegram.sent_to(ANA) == [
            "Scheduled task: weather\n\nRain after five.",
            "Subagent: research\n\nThree sources found.",
        ]


async def test_commands_are_routed_to_the_engine(telegram: FakeTelegram) -> None:
    async with running_stack(channel_factory(telegram)) as stack:
        before = (await stack.engine.sessions.get_or_create(ChatRef("telegram", str(ANA)))).segment.id
        telegram.push_text(ANA, "/new@klaw_test_bot")
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(ANA)[0].startswith("Started a new conversation")
        after = (await stack.engine.sessions.get_or_create(ChatRef("telegram", str(ANA)))).segment.id
        assert after != before
        assert stack.server.chat_requests == []  # answered by the engine, not the model
        telegram.push_text(ANA, "/start")
        await telegram.wait_for_sent(2)
        assert telegram.sent_to(ANA)[1].startswith("Commands:")  # /start is /help


async def test_a_command_addressed_to_another_bot_is_ignored(telegram: FakeTelegram) -> None:
    """In a group with several bots, `/new@other_bot` is for the other bot: not run, not stored, no reply."""
    async with running_stack(channel_factory(telegram)) as stack:
        chat = ChatRef("telegram", str(ANA))
        before = (await stack.engine.sessions.get_or_create(chat)).segment.id
        stack.server.reply_text("Hi Ana.")
        telegram.push_text(ANA, "/new@other_bot")
        telegram.push_text(ANA, "/status@Other_Bot please")
        telegram.push_text(ANA, "hello")
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(ANA) == ["Hi Ana."]  # no "Unknown command"
        assert (await stack.engine.sessions.get_or_create(chat)).segment.id == before
        assert [m["content"] for m in stack.server.chat_requests[-1].body["messages"] if m["role"] == "user"] == [
            "hello"
        ]


async def test_non_text_messages_get_a_note(telegram: FakeTelegram) -> None:
    async with running_stack(channel_factory(telegram)):
        telegram.push_text(ANA, "placeholder")
        telegram.updates[-1]["message"].pop("text")
        telegram.updates[-1]["message"]["sticker"] = {
            "file_id": "x",
            "file_unique_id": "y",
            "width": 1,
            "height": 1,
            "is_animated": False,
            "is_video": False,
            "type": "regular",
        }
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(ANA) == [NOT_TEXT]


async def test_neither_the_token_nor_message_text_reaches_the_logs(
    telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_stack(channel_factory(telegram)) as stack:
        stack.server.reply_text("the reply mentions rosebud")
        telegram.push_text(ANA, "my password is swordfish")
        telegram.push_text(STRANGER, "stranger danger text")
        await telegram.wait_for(lambda: len(telegram.sent) >= 2)
    assert "SECRET-bot-token" not in caplog.text
    for secret in ("swordfish", "rosebud", "stranger danger"):
        assert secret not in caplog.text
