"""`klaw chat` in a real terminal names the tools a turn called above its answer, as the web page does
under its reply; piped, only the answer reaches stdout. Before, neither said a tool was called."""

from __future__ import annotations

import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.piped_chat import piped


@needs_tmux
async def test_the_tools_a_turn_called_are_named_above_its_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_tool_calls([("current_time", {}), ("current_time", {"timezone": "UTC"})])
        model.reply_tool_calls([("file_list", {})])
        model.reply_text("It is noon.")
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("what time is it?")
            screen = await term.wait_for_prompt_after("It is noon.", "the turn's reply")
            assert "Tools used: current_time ×2, file_list\nIt is noon." in screen, screen
            await term.type_line("thanks")
            screen = await term.wait_for_prompt_after("echo: thanks", "a reply without tools")
            assert screen.count("Tools used:") == 1  # a turn without tool calls has no such line
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
        model.reply_tool_calls([("current_time", {})])
        model.reply_text("Noon again.")
        assert (await piped(env, "and now?\n"))[:2] == (0, "Noon again.\n")  # stdout holds the answer alone
