"""`klaw chat`'s banner and start-up check are about the model this chat will use: its own /model
choice (which outlives the process) when it made one, else routing.default. A person in tmux."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, chat_without_a_terminal, closed_port, init_home, needs_tmux, terminal


@needs_tmux
async def test_the_banner_and_the_check_follow_the_chats_own_model_choice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    for name in ("t1", "t2"):
        (tmp_path / name).mkdir()
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__MODELS__DEAD__BASEURL": dead}
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "t1") as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            await term.type_line("/model FAKE")  # chosen, not merely followed
            await term.wait_for_prompt_after("FAKE", "the /model reply")
            await term.type_line("/exit")
            assert await term.exit_status() == 0

        # routing.default now names a model whose key is not set; this chat chose the stand-in
        keyless = {
            **env,
            "KLAW__MODELS__KEYLESS__BASEURL": dead,
            "KLAW__MODELS__KEYLESS__APIKEYENV": "KLAW_TEST_NEVER_SET_KEY",
            "KLAW__ROUTING__DEFAULT": "KEYLESS",
        }
        async with terminal([sys.executable, "-m", "klaw", "chat"], keyless, tmp_path / "t2") as term:
            screen = await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            assert "model FAKE" in screen and "KLAW_TEST_NEVER_SET_KEY" not in screen
            await term.type_line("still here")
            await term.wait_for_prompt_after("echo: still here", "the chosen model's reply")
            await term.type_line("/model DEAD")
            await term.wait_for_prompt_after("DEAD", "the /model reply")
            await term.type_line("/exit")
            assert await term.exit_status() == 0

    result = await asyncio.to_thread(chat_without_a_terminal, env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert f"No model server answered at {dead}" in result.stderr
    assert "this chat's model, chosen with /model DEAD" in result.stderr
    assert "/model <id>" in result.stderr
