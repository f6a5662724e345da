"""A message alone over the model's context budget (a newcomer pasted 58 KB into `klaw chat` on an
8192-token model): it goes to the model far over budget, and the screen only said "(klaw logged a
warning: see …)". Now the person is told, on screen, the estimate against the budget and to put long
text in a workspace file; a piped run says it on stderr (stdout stays the reply alone). The engine says it,
as a notice in the chat, the same on every channel (tests/channels/test_over_budget_said_everywhere.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.piped_chat import piped


async def test_a_58_kb_paste_piped_to_an_8192_token_model_is_said_in_figures(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__MODELS__FAKE__CONTEXTBUDGET": "8192"}
        model.reply_text("That is a long one.")
        code, out, err = await piped(env, "a log line of the paste\n" * 2_430)  # 58,320 characters
        said = " ".join(err.split())
        assert (code, out) == (0, "That is a long one.\n"), err
        assert "This message is ~14.6k tokens, over the 7.4k-token budget of" in said
        assert f"save it as a file in the workspace ({home / 'workspace'})" in said


@needs_tmux
async def test_a_message_over_budget_typed_at_the_terminal_is_said_on_screen(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("the answer")
        env = {**chat_env(home, model.base_url), "KLAW__MODELS__FAKE__CONTEXTBUDGET": "256"}
        async with terminal([sys.executable, "-m", "klaw", "chat", "--skip-check"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("word " * 240)  # ~300 tokens against a 230-token budget (256 is the least allowed)
            screen = await term.wait_for_prompt_after("the answer", "the reply")
            flat = " ".join(screen.split())
            assert "This message is ~304 tokens, over the 230-token budget of" in flat, screen
            assert "save it as a file in the workspace" in flat
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
