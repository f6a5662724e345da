"""`klaw chat` sends log lines to KLAW_HOME/logs/chat.log from before the engine starts: an MCP server
that cannot start (warned during the engine's start-up) is not printed raw above the banner. tmux."""

from __future__ import annotations

import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.test_chat_terminal import chat_env, init_home, needs_tmux, terminal


@needs_tmux
async def test_a_warning_during_start_up_goes_to_the_chat_log_not_above_the_banner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {
            **chat_env(home, model.base_url),
            "KLAW__MCP__SERVERS__NOTES__COMMAND": "/nonexistent/mcp-notes",
            "KLAW__TOOLS__ENABLED": "[clock, 'mcp:NOTES']",
        }
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            screen = await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            before_banner = screen.split("klaw — model")[0]
            assert "MCP server" not in before_banner and "WARNING" not in before_banner, screen
            await term.type_line("/exit")
            assert await term.exit_status() == 0
    log = (home / "logs" / "chat.log").read_text(encoding="utf-8")
    assert "MCP server 'NOTES' is unavailable (it failed to start: there is no program '/nonexistent/mcp-notes'" in log
