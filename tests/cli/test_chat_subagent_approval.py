"""newcomer23's repro in `klaw chat` itself (a real process in tmux, the stand-in model's `!tool` convention):
a subagent spawned at the prompt asks there for its held file_write, `approve? [y/N]`, and writes on `y`
(decision 525, item 1). Before, the run was refused "a scheduled task's run has nobody to ask"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.stand_in import stand_in_reply
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, terminal
from tests.cli.test_chat_terminal_approval import APPROVE, hold_file_write


@needs_tmux
async def test_a_subagent_spawned_at_the_prompt_asks_there_and_writes_on_yes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    inner = "!file_write " + json.dumps({"path": "sub.txt", "content": "x"})
    async with FakeOpenAiServer(default_reply=stand_in_reply) as model:
        env = chat_env(home, model.base_url)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("!subagent_spawn " + json.dumps({"task_name": "held", "message": inner}))
            screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the subagent's question")
            assert "The subagent 'held', which the agent spawned from this chat, wants to run file_write:" in screen
            assert "path: sub.txt" in screen and "scheduled task" not in screen
            await term.type_line("y")
            await term.wait_for(lambda s: "Approved: file_write runs now." in s, "the answer taken")
            await term.wait_for(lambda s: "The tool answered: " in s.split("Approved: file_write")[-1], "its answer")
            assert (home / "workspace" / "sub.txt").read_text(encoding="utf-8") == "x"
            assert "Traceback" not in await term.screen()
