"""A message alone over the model's context budget is said in every channel (decision 285): only
`klaw chat` said it ("This message is ~14.6k tokens, over the 7.4k-token budget of …"), from a check of
its own; on the web page and on Telegram it was only logged, and the person got the model's answer (or
its failure) with nothing explaining. The engine now says it in the chat before the model is asked.
The whole stack: fake OpenAI server, engine on its socket, gateway, the web channel over real HTTP and
the Telegram channel against the fake Bot API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from klaw.channels.telegram import TYPING_EVERY_SECONDS, TelegramChannel
from klaw.channels.web.auth import CSRF_HEADER
from klaw.channels.web.channel import WebChannel
from klaw.config import TelegramChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_telegram import ANA, TOKEN
from tests.channels.test_web_app import session_csrf
from tests.channels.test_web_guard import sign_in_with, web_channel


def small_model() -> dict[str, Any]:
    """The default model with a 500-token budget (450 with the margin); fresh each time, as engine_config
    fills in the fake server's address."""
    return {"models": {"fake/small": {"contextBudget": 500, "maxRetries": 0}}}


LONG = "a line of the pasted log\n" * 120  # 3,000 characters: ~750 tokens, and one Telegram message
SAID = "over the 450-token budget of fake/small (its contextBudget, less a 10% margin)"


def _said_in_full(text: str, workspace: str) -> None:
    flat = " ".join(text.split())
    assert flat.startswith("This message is ~"), text
    assert SAID in flat and f"save it as a file in the workspace ({workspace})" in flat, text


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(TOKEN) as fake:
        yield fake


async def _events_until_reply(stream: AsyncIterator[str]) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    kind = ""
    async for line in stream:
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:") and kind != "delta":
            events.append((kind, json.loads(line.removeprefix("data:"))))
            if kind in {"reply", "error"}:
                return events
    return events


async def test_the_web_page_is_told_then_gets_the_answer() -> None:
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder), **small_model()) as stack:
        web = holder[0]
        stack.server.reply_text("That is a long log.")
        async with httpx.AsyncClient(base_url=web.url.rstrip("/"), timeout=30) as client:
            await sign_in_with(client, web.token)
            headers = {CSRF_HEADER: await session_csrf(client)}
            async with client.stream("GET", "/api/events") as events:
                sent = await client.post("/api/messages", json={"text": LONG}, headers=headers)
                assert sent.status_code == 200, sent.text
                said = await _events_until_reply(events.aiter_lines())
        assert [kind for kind, _ in said] == ["notice", "reply"]
        _said_in_full(said[0][1]["text"], str(stack.home.workspace))
        assert said[1][1]["text"] == "That is a long log."
        short = "a short question"
        stack.server.reply_text("A short answer.")
        async with httpx.AsyncClient(base_url=web.url.rstrip("/"), timeout=30) as client:
            await sign_in_with(client, web.token)
            headers = {CSRF_HEADER: await session_csrf(client)}
            answer = await client.post("/api/messages", params={"wait": 20}, json={"text": short}, headers=headers)
        assert answer.json()["reply"]["text"] == "A short answer."  # a message within the budget: nothing said


async def test_telegram_is_told_then_gets_the_answer_typing_all_along(telegram: FakeTelegram) -> None:
    """The note is its own message; the typing indicator goes on after it until the answer comes (it
    stopped at the note, and the person saw nothing happen while the model read the long message)."""
    clock = ManualClock()
    answer = asyncio.Event()

    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[TelegramChannel]:
        config = TelegramChannelConfig(enabled=True, allowed_chat_ids=(ANA,), api_base_url=telegram.base_url)
        return [TelegramChannel(config, TOKEN, commands=loaded.config.commands, poll_timeout=1, clock=clock)]

    async with running_stack(make, **small_model()) as stack:
        stack.server.reply_text("That is a long log.", before=answer.wait)
        telegram.push_text(ANA, LONG)
        await telegram.wait_for_sent(1)
        _said_in_full(telegram.sent_to(ANA)[0], str(stack.home.workspace))
        typing = len(telegram.actions)
        await clock.advance(TYPING_EVERY_SECONDS)
        await telegram.wait_for(lambda: len(telegram.actions) > typing)  # still typing after the note
        answer.set()
        await telegram.wait_for_sent(2)
        assert telegram.sent_to(ANA)[1] == "That is a long log."
