"""Approval and message_send in Telegram end to end (python-telegram-bot against the fake Bot API, a real
gateway and engine, the fake OpenAI server): the question to run a held tool arrives as a Telegram
message and `/approve ID` typed there lets the turn go on; a message the agent sends from the web page's
chat arrives in the person's Telegram chat."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from klaw.channels.approval_mark import APPROVAL_HEADING
from klaw.store.records import ChatRef
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_telegram import ANA, TOKEN, channel_factory

TELEGRAM_CHAT = {"telegram": {"enabled": True, "allowedChatIds": [ANA]}}  # the engine's view: Ana is the person


HEADED = f"{APPROVAL_HEADING}\n\n"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(TOKEN) as fake:
        yield fake


async def test_a_held_tool_is_approved_from_telegram(telegram: FakeTelegram) -> None:
    async with running_stack(channel_factory(telegram), tools={"approval": ["file_write"]}) as stack:
        stack.server.reply_tool_calls([("file_write", {"path": "list.txt", "content": "milk, eggs"})])
        stack.server.reply_text("Saved your list.")
        telegram.push_text(ANA, "save my shopping list")
        await telegram.wait_for_sent(1)
        question = telegram.sent_to(ANA)[0]
        # klaw's heading, bold (an entity a reply's plain text cannot make), then the question (decision 532)
        assert question.startswith(f"{HEADED}The agent wants to run file_write:")
        assert telegram.sent[0].bold == [APPROVAL_HEADING]
        # newcomer23: the fences came through as raw backticks; the arguments are Telegram's code block (525)
        assert "```" not in question, question
        assert question.startswith(
            f"{HEADED}The agent wants to run file_write:\npath: list.txt\ncontent: milk, eggs\n/approve "
        )
        assert telegram.sent[0].code == ["path: list.txt\ncontent: milk, eggs"]
        found = re.search(r"/approve ([0-9a-f]{4})", question)
        assert found is not None, question
        assert not (stack.home.workspace / "list.txt").exists()

        telegram.push_text(ANA, f"/approve {found.group(1)}")
        await telegram.wait_for(lambda: "Saved your list." in telegram.sent_to(ANA))
        assert "Approved: file_write runs now." in telegram.sent_to(ANA)
        assert (stack.home.workspace / "list.txt").read_text(encoding="utf-8") == "milk, eggs"


async def test_message_send_from_the_web_chat_arrives_in_telegram(telegram: FakeTelegram) -> None:
    async with running_stack(channel_factory(telegram), channels=TELEGRAM_CHAT) as stack:
        stack.server.reply_tool_calls([("message_send", {"target": f"telegram:{ANA}", "text": "The build is green."})])
        stack.server.reply_text("Told you on Telegram.")
        await stack.engine.submit(ChatRef("web", "main"), "tell me on telegram when the build is green: it is")
        await telegram.wait_for_sent(1)
        # fh9: it arrived bare, as if it answered Ana's last message here; it opens with where it was written
        assert telegram.sent_to(ANA) == ["From web:main\n\nThe build is green."]
        assert telegram.sent[0].bold == ["From web:main"]  # tg: the heading is an entity, not just text
        # where the message came from is the stored record's metadata, not history a person reads
        segment = await stack.engine.store.segments.current(ChatRef("telegram", str(ANA)))
        [message] = await stack.engine.store.messages.window(segment.id, 10)
        assert (message.content, message.record.metadata) == (
            "The build is green.",
            {"source": "message_send", "from": "web:main"},
        )


async def test_a_reply_that_starts_like_a_heading_cannot_pass_for_one(telegram: FakeTelegram) -> None:
    """adversary16: the "From web:main" heading was only a first line of text, so a reply the model wrote
    to start the same way looked the same. klaw's heading is bold (an entity); the model's text is plain."""
    async with running_stack(channel_factory(telegram), channels=TELEGRAM_CHAT) as stack:
        stack.server.reply_text("From web:main\n\nYour bank wants your password.")
        telegram.push_text(ANA, "hello")
        await telegram.wait_for_sent(1)
        [sent] = telegram.sent
        assert sent.text.startswith("From web:main") and sent.bold == []


async def test_a_questions_code_block_holds_backticks_and_emoji_at_telegrams_offsets(telegram: FakeTelegram) -> None:
    """The arguments' own ``` (a longer fence around them) and characters two UTF-16 units long (Telegram counts
    those) are inside the `pre` entity exactly, and the text before it is offset right."""
    content = "🥚 eggs\n```\nnot a fence of klaw's\n```"
    async with running_stack(channel_factory(telegram), tools={"approval": ["file_write"]}) as stack:
        stack.server.reply_tool_calls([("file_write", {"path": "ü😀.txt", "content": content})])
        stack.server.reply_text("Not saved.")
        telegram.push_text(ANA, "save it")
        await telegram.wait_for_sent(1)
        question = telegram.sent_to(ANA)[0]
        assert question.startswith(
            f"{HEADED}The agent wants to run file_write:\npath: ü😀.txt\ncontent: {content}\n/approve "
        )
        assert telegram.sent[0].code == [f"path: ü😀.txt\ncontent: {content}"]


async def test_a_reply_imitating_a_question_arrives_without_its_bold_heading(telegram: FakeTelegram) -> None:
    """adversary32: a reply can write the question's words, klaw's heading included; only klaw's own
    question is headed in bold (decision 532)."""
    imitation = f"{APPROVAL_HEADING}\n\nThe agent wants to run file_write: notes.txt\n/approve 4a9c or /deny 4a9c"
    async with running_stack(channel_factory(telegram), tools={"approval": ["file_write"]}) as stack:
        stack.server.reply_text(imitation)
        stack.server.reply_tool_calls([("file_write", {"path": "list.txt", "content": "milk"})])
        stack.server.reply_text("Not saved.")
        telegram.push_text(ANA, "pretend")
        await telegram.wait_for_sent(1)
        telegram.push_text(ANA, "save it")
        await telegram.wait_for_sent(2)
        fake, real = telegram.sent[:2]
        assert fake.text == imitation and fake.bold == []
        assert real.text.startswith(HEADED) and real.bold == [APPROVAL_HEADING]
