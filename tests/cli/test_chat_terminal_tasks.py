"""`klaw chat` in a real terminal: a subagent's answer appears while the person sits at the prompt."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import PROMPT, chat_env, init_home, needs_tmux, terminal


@needs_tmux
async def test_a_subagent_answer_is_shown_at_the_prompt_without_typing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        # One LLM slot: the turn keeps it to the end, so the run's request is the third one.
        env = {**chat_env(home, model.base_url), "KLAW__PROCESSING__MAXCONCURRENTLLM": "1"}
        model.reply_tool_calls([("subagent_spawn", {"task_name": "research", "message": "find sources"})])
        model.reply_text("Started it in the background.")
        gate = asyncio.Event()
        model.reply_text("Here are three sources.", before=gate.wait)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("research this for me")
            await term.wait_for_prompt_after("Started it in the background.", "the turn's reply")
            gate.set()
            # Printed above the prompt, which comes back below it, ready to type. Drawing it there is
            # two writes (the prompt erased and the answer written, then the prompt drawn again): on a
            # loaded machine a screen read between them shows the answer without the prompt yet, so
            # the wait is for both, as for the turn's reply above.
            screen = await term.wait_for_prompt_after("Here are three sources.", "the subagent's answer")
            assert screen.rstrip().endswith(PROMPT.rstrip())
            assert "Subagent: research\nHere are three sources." in screen  # whose answer it is
            # A spawned run keeps its own log, never a scheduled task's of the same name (decision 217).
            assert (home / "conversations" / "scheduler_spawn%3Aresearch").is_dir()
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
