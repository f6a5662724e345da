"""A skill typed as a command (newcomer22, decision 514): `/weather-report Tbilisi` was answered "Unknown command
/weather-report. Type /help for the list of commands." with no hint that it names a skill. The answer now says it
is a skill and how to ask for it, with the words typed after it: from the engine (`Engine.submit`, which a
gateway's command frame reaches too) and from a piped `klaw chat`, which answers a name no command has before
any engine starts. A name that is no usable skill keeps the old words."""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_skills_turns import write_skills


async def test_a_skills_name_typed_as_a_command_says_it_is_a_skill_and_how_to_ask_for_it(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        write_skills(h.home.skills_dir)
        said = (await h.engine.submit(CHAT, "/weather-report Tbilisi")).command_reply
        assert said is not None
        assert said.startswith("weather-report is a skill, not a command: ask for it in words"), said
        assert 'e.g. "use the weather-report skill for Tbilisi"' in said, said
        assert "skills take no arguments after a slash" in said, said
        alone = (await h.engine.submit(CHAT, "/garden-plan")).command_reply
        assert alone is not None and 'e.g. "use the garden-plan skill".' in alone, alone
        # a broken skill is left out, so it is no skill the agent can use; a typo stays a typo
        for typed in ("/broken-skill", "/weather"):
            reply = (await h.engine.submit(CHAT, typed)).command_reply
            assert reply == f"Unknown command {typed}. Type /help for the list of commands.", reply
        assert not h.server.chat_requests  # a command never reaches the model


async def test_a_piped_chat_says_a_skills_name_is_a_skill_before_any_engine(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    write_skills(home / "workspace" / "skills")
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        code, out, err = await piped(env, "/weather-report Tbilisi")
        assert code == 1, (out, err)
        said = " ".join(err.split())
        assert 'weather-report is a skill, not a command: ask for it in words, e.g. "use the weather-report' in said
        code, out, err = await piped(env, "/wether-report")
        assert code == 1 and "Unknown command /wether-report" in " ".join(err.split()), err
        assert not model.chat_requests
