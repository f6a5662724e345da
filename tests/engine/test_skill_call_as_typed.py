"""A skill called by name reaches the engine as the person typed it, whichever channel (decision 536): the web page
and Telegram went through the gateway's command frame, which lowercased the name and trimmed the words, so
`/Weather-Report Tbilisi  metric` was stored and shown to the model as `/weather-report Tbilisi metric` there and
as typed from the console. Telegram showed no "typing…" while a skill's turn ran (it does for any message's), and a
piped `/help` before an engine listed every skills folder holding a SKILL.md, one the engine leaves out too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from klaw.channels.telegram import TelegramChannel
from klaw.channels.web.auth import CSRF_HEADER
from klaw.channels.web.channel import WebChannel
from klaw.config import TelegramChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.stack import running_stack
from tests.channels.test_telegram import ANA, TOKEN
from tests.channels.test_web_app import session_csrf
from tests.channels.test_web_guard import sign_in_with, web_channel
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.piped_chat import piped
from tests.engine.harness import running_engine
from tests.engine.test_skill_called_by_name import received, telegram, write_skills

__all__ = ["telegram"]  # the fixture, imported for this file's tests

TYPED = "/Weather-Report Tbilisi  metric"
FILLED_TYPED = "Report the weather for Tbilisi in metric units. Everything typed: Tbilisi  metric."


async def test_the_console_web_page_and_telegram_pass_the_same_text(tmp_path: Path, telegram: FakeTelegram) -> None:
    async with running_engine(tmp_path / "console") as h:  # Engine.submit: what the console hands the engine
        write_skills(h.home.skills_dir)
        h.server.reply_text("Tbilisi: 21 C.")
        await h.turn(TYPED)
        console_system, console_user = received(h.server.chat_requests[-1].body)
    assert console_user == TYPED and FILLED_TYPED in console_system, console_user

    holder: list[WebChannel] = []

    def make(home: KlawHome, loaded: LoadedConfig, model: FakeOpenAiServer) -> list[Any]:
        config = TelegramChannelConfig(enabled=True, allowed_chat_ids=(ANA,), api_base_url=telegram.base_url)
        bot = TelegramChannel(config, TOKEN, commands=loaded.config.commands, poll_timeout=1)
        return [*web_channel(holder)(home, loaded, model), bot]

    async with running_stack(make) as stack:
        write_skills(stack.home.skills_dir)
        stack.server.reply_text("Tbilisi: 21 C.")
        async with httpx.AsyncClient(base_url=holder[0].url.rstrip("/"), timeout=30) as client:
            await sign_in_with(client, holder[0].token)
            headers = {CSRF_HEADER: await session_csrf(client)}
            answer = await client.post("/api/messages", params={"wait": 20}, json={"text": TYPED}, headers=headers)
        assert answer.json()["reply"]["text"] == "Tbilisi: 21 C.", answer.text
        system, user = received(stack.server.chat_requests[-1].body)
        assert user == TYPED and FILLED_TYPED in system, user  # on main: /weather-report Tbilisi  metric

        going = asyncio.Event()  # the model's reply held until "typing…" was seen

        async def held() -> None:
            await going.wait()

        stack.server.reply_text("Oslo: 3 C.", before=held)
        telegram.push_text(ANA, "/Weather-Report@klaw_test_bot Oslo  imperial")
        await telegram.wait_for(lambda: (ANA, "typing") in telegram.actions, seconds=30)
        going.set()
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(ANA) == ["Oslo: 3 C."]
        system, user = received(stack.server.chat_requests[-1].body)
        assert user == "/Weather-Report Oslo  imperial", user
        assert "Report the weather for Oslo in imperial units." in system, system


async def test_a_piped_help_lists_the_skills_the_engine_would_call(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    skills = home / "workspace" / "skills"
    write_skills(skills)
    (skills / "half-done").mkdir()
    (skills / "half-done" / "SKILL.md").write_text("no front matter yet\n", encoding="utf-8")
    checked = klaw_here(home, "skills", "check")
    assert "half-done" in checked.stdout and checked.returncode == 1, checked.stdout  # left out by the check
    async with FakeOpenAiServer() as model:
        code, out, err = await piped(chat_env(home, model.base_url), "/help")
    assert code == 0, err
    listed = out[out.index("Skills (") :]
    assert "/weather-report" in listed and "/garden-plan" in listed, out
    assert "/half-done" not in listed and "/house-rules" not in listed, out  # left out; not called by name
    assert not model.chat_requests
