"""What adversary33 found in skills called by name and commands (decision 543), through the engine (`Engine.submit`,
what the console and the library call) and the fake OpenAI-protocol server showing what the model received:
a `$5` or `${2}` the person typed reached the model filled in turn (the positional pass ran over the text just put
in for `$ARGUMENTS`); a newline, tab or non-breaking space after a name made the whole line an unknown name;
`/upper x` for a skill left out by a rule said only "Unknown command"; and a piped `/help` with no engine must leave
out a `user-invocable: false` skill and answer `/help NAME` for a skill."""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_skill_called_by_name import received, write_skills

PAY = """---
name: pay
description: Pay someone.
---
Pay exactly: $ARGUMENTS. First word $1.
"""


async def test_what_the_person_typed_is_filled_in_once(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        (h.home.skills_dir / "pay").mkdir(parents=True)
        (h.home.skills_dir / "pay" / "SKILL.md").write_text(PAY, encoding="utf-8")
        h.server.reply_text("Paid.")
        await h.turn("/pay $5 to Bob for ${2} and $1")
        system, user = received(h.server.chat_requests[-1].body)
        assert user == "/pay $5 to Bob for ${2} and $1"
        assert "Pay exactly: $5 to Bob for ${2} and $1. First word $5." in system, system


async def test_any_whitespace_ends_a_name(tmp_path: Path) -> None:
    """Shift+Enter or a paste puts a newline after the name; a tab or a non-breaking space come from pasting."""
    async with running_engine(tmp_path) as h:
        write_skills(h.home.skills_dir)
        h.server.reply_text("Oslo: 3 C.")
        reply = await h.turn("/weather-report\nOslo\tmetric")
        assert reply.text == "Oslo: 3 C."
        system, _ = received(h.server.chat_requests[-1].body)
        assert "Report the weather for Oslo in metric units." in system, system
        asked = len(h.server.chat_requests)
        status = (await h.engine.submit(CHAT, "/status\nplease")).command_reply
        assert status is not None and "Uptime" in status, status
        help_ = (await h.engine.submit(CHAT, "/help\u00a0weather-report")).command_reply
        assert help_ is not None and help_.startswith("/weather-report [words]"), help_
        forget = (await h.engine.submit(CHAT, "/forget\tlast")).command_reply
        assert forget is not None and "Unknown command" not in forget, forget
        assert len(h.server.chat_requests) == asked


UPPER = """---
name: Upper
description: Shout the words back.
---
Shout $ARGUMENTS.
"""
LEFT_OUT = "the skill folder 'Upper' is left out, its SKILL.md breaks a rule"
HOW_CALLED = "/weather-report [words] — calls the weather-report skill with the words as its $ARGUMENTS: Write a short"


def write_upper(skills: Path) -> None:
    (skills / "Upper").mkdir(parents=True, exist_ok=True)
    (skills / "Upper" / "SKILL.md").write_text(UPPER, encoding="utf-8")


async def test_help_about_a_skill_and_a_skill_left_out(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        write_skills(h.home.skills_dir)
        write_upper(h.home.skills_dir)
        about = (await h.engine.submit(CHAT, "/help weather-report")).command_reply
        assert about is not None and about.startswith(HOW_CALLED), about
        for typed in ("/upper x", "/Upper", "/help upper"):
            said = (await h.engine.submit(CHAT, typed)).command_reply
            assert said is not None and LEFT_OUT in said and "'klaw skills check'" in said, (typed, said)
        assert not h.server.chat_requests


async def test_a_piped_chat_without_an_engine_says_the_same(tmp_path: Path) -> None:
    """`echo … | klaw chat` answers these before any engine starts (decision 431); the model is never asked."""
    home = tmp_path / "home"
    init_home(home)
    write_skills(home / "workspace" / "skills")
    write_upper(home / "workspace" / "skills")
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        code, out, err = await piped(env, "/help")
        assert code == 0 and "/weather-report — Write a short weather report" in out, (out, err)
        assert "house-rules" not in out and "Upper" not in out and "/upper" not in out, out  # decision 529
        code, out, err = await piped(env, "/help weather-report")
        assert code == 0 and out.startswith(HOW_CALLED), (out, err)
        code, out, err = await piped(env, "/upper x")
        said = " ".join(err.split())
        assert code == 1 and LEFT_OUT in said and "'klaw skills check'" in said, (out, err)
        assert not model.chat_requests
