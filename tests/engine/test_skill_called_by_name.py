"""A skill called by name, `/weather-report Tbilisi metric` (decision 529): it was refused with words saying it is a
skill (decision 514) and `$ARGUMENTS` was never filled. Now the text is an ordinary message starting an ordinary
turn, stored as typed, and the model receives the skill's body with `$ARGUMENTS` and `$1`..`$9` filled (the
`skill_call` layer): through the engine (`Engine.submit`, what the console and the library call), a piped `klaw
chat`, the library's `ask`, and a gateway's command frame from the web page and from Telegram (fake Bot API). The
fake OpenAI-protocol server shows what the model received. A command of the same name wins; a skill marked
`user-invocable: false` is refused with words; a typo gets the unknown-command words with the nearest names."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

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
from tests.cli.chat_terminal import chat_env, greeted_chat, init_home, terminal
from tests.cli.piped_chat import piped
from tests.engine.harness import CHAT, running_engine
from tests.serve_helpers import running, stop, web_page

WEATHER = """---
name: weather-report
description: Write a short weather report for a city.
---
Report the weather for $1 in $2 units. Everything typed: $ARGUMENTS.
"""
GARDEN = """---
name: garden-plan
description: Plan what to sow and when.
---
Plan the garden month by month.
"""
SECRET = """---
name: house-rules
description: How the house automation is wired.
user-invocable: false
---
Never called by name.
"""
STATUS = """---
name: status
description: A skill named like a command.
---
Shadowed.
"""
FILLED = "Report the weather for Tbilisi in metric units. Everything typed: Tbilisi metric."


def write_skills(skills: Path) -> None:
    for name, text in (
        ("weather-report", WEATHER),
        ("garden-plan", GARDEN),
        ("house-rules", SECRET),
        ("status", STATUS),
    ):
        (skills / name).mkdir(parents=True, exist_ok=True)
        (skills / name / "SKILL.md").write_text(text, encoding="utf-8")


def received(body: Any) -> tuple[str, str]:
    """(the system messages joined, the last user message) of one request the model received."""
    messages = body["messages"]
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    user = [m["content"] for m in messages if m["role"] == "user"][-1]
    return system, user


async def test_a_skill_called_by_name_reaches_the_model_filled(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        write_skills(h.home.skills_dir)
        h.server.reply_text("Tbilisi: 21 C.")
        reply = await h.turn("/weather-report Tbilisi metric")
        assert reply.text == "Tbilisi: 21 C."
        system, user = received(h.server.chat_requests[-1].body)
        assert user == "/weather-report Tbilisi metric"  # the person's own text, as stored
        assert "a call of the skill weather-report" in system and FILLED in system, system
        h.server.reply_text("Sow peas.")
        await h.turn("/garden-plan zone 7")
        system, _ = received(h.server.chat_requests[-1].body)
        assert "Plan the garden month by month.\n\nArguments: zone 7" in system, system
        assert FILLED not in system  # the earlier call's layer is that turn's only
        asked = len(h.server.chat_requests)
        refused = (await h.engine.submit(CHAT, "/house-rules now")).command_reply
        assert refused is not None and "house-rules skill is not called by name" in refused, refused
        assert "user-invocable: false" in refused
        typo = (await h.engine.submit(CHAT, "/wether-report Oslo")).command_reply
        assert (
            typo
            == "Unknown command /wether-report (did you mean /weather-report?). Type /help for the list of commands."
        )
        status = (await h.engine.submit(CHAT, "/status")).command_reply  # the command wins over the skill
        assert status is not None and "Uptime" in status, status
        listed = (await h.engine.submit(CHAT, "/help")).command_reply
        assert listed is not None and "\n/weather-report — Write a short weather report for a city.\n" in listed + "\n"
        assert "/garden-plan — Plan what to sow and when." in listed, listed
        assert "house-rules" not in listed and listed.count("/status") == 1, listed
        assert len(h.server.chat_requests) == asked  # commands and refusals never reach the model


async def test_a_piped_chat_and_the_library_call_a_skill(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    write_skills(home / "workspace" / "skills")
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_text("Tbilisi: 21 C.")
        code, out, err = await piped(env, "/weather-report Tbilisi metric")
        assert code == 0 and out.strip() == "Tbilisi: 21 C.", (out, err)
        system, user = received(model.chat_requests[-1].body)
        assert user == "/weather-report Tbilisi metric" and FILLED in system, system
        asked = len(model.chat_requests)
        code, out, err = await piped(env, "/wether-report")
        assert code == 1 and "Unknown command /wether-report (did you mean /weather-report?)" in " ".join(err.split())
        code, out, err = await piped(env, "/help")
        assert code == 0 and "/weather-report" in out and "Skills (" in out, out
        assert len(model.chat_requests) == asked

        model.reply_text("Sow peas.")  # the library's ask, in a program of its own on the same home
        program = (
            "import asyncio, os, klaw\nasync def main():\n    async with klaw.Klaw(os.environ['KLAW_HOME']) as agent:\n"
        )
        program += "        print(await agent.ask('notebook', '/garden-plan zone 7'))\nasyncio.run(main())\n"
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", program, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out_bytes, err_bytes = await asyncio.wait_for(process.communicate(), timeout=120)
        assert process.returncode == 0 and out_bytes.decode().strip() == "Sow peas.", err_bytes.decode()
        system, user = received(model.chat_requests[-1].body)
        assert user == "/garden-plan zone 7" and "Arguments: zone 7" in system, system


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(TOKEN) as fake:
        yield fake


async def test_the_web_page_and_telegram_call_a_skill(telegram: FakeTelegram) -> None:
    holder: list[WebChannel] = []

    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[Any]:
        config = TelegramChannelConfig(enabled=True, allowed_chat_ids=(ANA,), api_base_url=telegram.base_url)
        bot = TelegramChannel(config, TOKEN, commands=loaded.config.commands, poll_timeout=1)
        return [*web_channel(holder)(home, loaded, server), bot]

    async with running_stack(make) as stack:
        write_skills(stack.home.skills_dir)
        web = holder[0]
        stack.server.reply_text("Tbilisi: 21 C.")
        async with httpx.AsyncClient(base_url=web.url.rstrip("/"), timeout=30) as client:
            await sign_in_with(client, web.token)
            headers = {CSRF_HEADER: await session_csrf(client)}
            typed = {"text": "/weather-report Tbilisi metric"}
            answer = await client.post("/api/messages", params={"wait": 20}, json=typed, headers=headers)
        assert answer.json()["reply"]["text"] == "Tbilisi: 21 C.", answer.text
        system, user = received(stack.server.chat_requests[-1].body)
        assert user == "/weather-report Tbilisi metric" and FILLED in system, system
        stack.server.reply_text("Oslo: 3 C.")
        telegram.push_text(ANA, "/weather-report Oslo imperial")
        await telegram.wait_for_sent(1)
        assert telegram.sent_to(ANA)[0] == "Oslo: 3 C."
        system, user = received(stack.server.chat_requests[-1].body)
        assert user == "/weather-report Oslo imperial", user
        assert "Report the weather for Oslo in imperial units." in system, system
        telegram.push_text(ANA, "/house-rules")
        await telegram.wait_for_sent(2)
        assert "house-rules skill is not called by name" in telegram.sent_to(ANA)[1]
        await asyncio.sleep(0)


async def test_the_console_calls_a_skill_in_a_terminal(tmp_path: Path) -> None:
    """`klaw chat` at a terminal (tmux): the reply to `/weather-report …` is shown, and `/help` lists the skill."""
    home = tmp_path / "home"
    init_home(home)
    write_skills(home / "workspace" / "skills")
    async with FakeOpenAiServer() as model:
        model.reply_text("Tbilisi is sunny.")
        async with greeted_chat(chat_env(home, model.base_url), tmp_path) as term:
            await term.type_line("/weather-report Tbilisi metric")
            await term.wait_for_prompt_after("Tbilisi is sunny.", "the skill's reply")
            system, user = received(model.chat_requests[-1].body)
            assert user == "/weather-report Tbilisi metric" and FILLED in system, system
            await term.type_line("/help")
            screen = await term.wait_for_prompt_after("Skills (", "/help's skills")
            assert "/garden-plan" in screen and "/house-rules" not in screen, screen
            await term.type_line("/exit")
            assert await term.exit_status() == 0


async def test_beside_klaw_serve_a_pipe_and_a_terminal_call_a_skill(tmp_path: Path) -> None:
    """Beside a running `klaw serve` the chat's text goes over engine.sock as a command frame: the engine makes the
    skill's call a message there too, and the reply comes back to the pipe and to the attached terminal."""
    home = tmp_path / "home"
    init_home(home)
    write_skills(home / "workspace" / "skills")
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_text("Tbilisi: 21 C.")
            code, out, err = await piped(env, "/weather-report Tbilisi metric")
            assert (code, out) == (0, "Tbilisi: 21 C.\n"), err
            system, user = received(model.chat_requests[-1].body)
            assert user == "/weather-report Tbilisi metric" and FILLED in system, system
            model.reply_text("Oslo: 3 C.")
            async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
                await term.wait_for_prompt_after("Type /help", "the attached greeting")
                await term.type_line("/weather-report Oslo imperial")
                await term.wait_for_prompt_after("Oslo: 3 C.", "the skill's reply")
                await term.type_line("/exit")
                assert await term.exit_status() == 0
            system, user = received(model.chat_requests[-1].body)
            assert "Report the weather for Oslo in imperial units." in system, system
            await stop(serve)
