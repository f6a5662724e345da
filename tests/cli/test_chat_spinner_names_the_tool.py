"""The console's spinner while a tool runs names the tool and its own limit (newcomer23, decision 527).

It said "thinking… 23 s (klaw gives up after 120 s without a word from stand-in/echo)" while the sandbox ran
the model's code: the model was blamed for a wait that was the tool's, and the limit shown was not the one
that would end it (the sandbox's). `klaw chat` in tmux, the fake model asking for `code_execute`, the real
sandbox; then the reply after the tool. The same in a terminal attached to `klaw serve` (the engine's
`running_tool` query).
"""

from __future__ import annotations

import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import Terminal, chat_env, init_home, needs_tmux, terminal
from tests.serve_helpers import running, web_page
from tests.tools.workspace_turns import needs_sandbox

SLOW = {"language": "python", "code": "import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(6)"}


@needs_tmux
@needs_sandbox
async def test_the_spinner_names_the_running_tool_and_the_sandbox_limit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__SANDBOX__TIMEOUTSECONDS": "12"}
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            await _counts_the_tool(term, model)
        assert len(model.chat_requests) == 2


@needs_tmux
@needs_sandbox
async def test_an_attached_terminals_spinner_names_the_running_tool_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {
            **chat_env(home, model.base_url),
            "KLAW__SANDBOX__TIMEOUTSECONDS": "12",
            "KLAW__CHANNELS__WEB__PORT": "0",
        }
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
                await term.wait_for(lambda s: "attached to the running engine" in s, "the banner")
                await _counts_the_tool(term, model)
        assert len(model.chat_requests) == 2


async def _counts_the_tool(term: Terminal, model: FakeOpenAiServer) -> None:
    """A message whose turn runs slow code: the spinner names code_execute and the sandbox's limit."""
    model.reply_tool_calls([("code_execute", SLOW)])
    model.reply_text("the code ran out of time")
    await term.type_line("count slowly")
    screen = await term.wait_for(lambda s: "(sandbox limit 12 s)" in s, "the spinner naming the tool")
    line = next(row for row in screen.splitlines() if "sandbox limit" in row)
    assert "running code_execute… " in line and "thinking" not in line, line
    assert "gives up after" not in screen and "without a word from" not in screen, screen
    await term.wait_for_prompt_after("the code ran out of time", "the reply after the tool")
    await term.type_line("/exit")
    assert await term.exit_status() == 0
