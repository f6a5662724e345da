"""`klaw chat` in a real terminal (tmux) prints what a person or the model wrote literally, and log
lines never land inside the spinner.

Square brackets are rich's markup: `[/tmp]` read as a closing tag crashed the chat (and its engine),
`[urgent]` read as an unknown style vanished. The helpers are those of test_chat_terminal.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.test_chat_terminal import DEADLINE_SECONDS, chat_env, init_home, needs_tmux, terminal

CORE_MEMORY = {"place": "files in [/tmp]", "todo": "[urgent] call mom"}


@needs_tmux
async def test_brackets_in_memory_help_context_and_replies_are_shown_literally(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    (home / "core_memory.json").write_text(json.dumps(CORE_MEMORY), encoding="utf-8")
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CONTEXT__SLIDINGWINDOW": "2"}
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")

            await term.type_line("/memory")
            screen = await term.wait_for_prompt_after("call mom", "the /memory reply")
            assert '"files in [/tmp]"' in screen
            assert '"[urgent] call mom"' in screen

            await term.type_line("/help")
            screen = await term.wait_for_prompt_after("/help —", "the /help reply")
            assert "/model [id]" in screen
            assert "/summarizer [on|off|status]" in screen

            await term.type_line("My notes are under [/srv/notes] and [bold]not bold[/bold]")
            screen = await term.wait_for_prompt_after("echo: My notes are under", "the model's reply")
            assert "echo: My notes are under [/srv/notes] and [bold]not bold[/bold]" in screen

            for filler in ("first filler line", "second filler line", "third filler line"):
                await term.type_line(filler)
                await term.wait_for_prompt_after(f"echo: {filler}", f"the reply to {filler!r}")
            await term.type_line("where are my notes under srv")
            await term.wait_for_prompt_after("echo: where are my notes under srv", "the recalling turn's reply")

            await term.type_line("/context")
            screen = await term.wait_for_prompt_after("Auto-RAG recalled", "the /context reply")
            assert "[user] score" in screen
            assert "My notes are under [/srv/notes]" in screen

            await term.type_line("still here?")  # the engine survived everything above
            screen = await term.wait_for_prompt_after("echo: still here?", "a reply after the commands")
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
            screen = await term.screen()
            assert "Traceback" not in screen
            assert "MarkupError" not in screen


@needs_tmux
async def test_a_warning_logged_while_the_model_thinks_is_a_line_of_its_own(tmp_path: Path) -> None:
    """A context over its budget is logged during the turn, while the spinner runs: the log line is
    printed above the spinner through the same console, whole, never glued to "thinking…"."""
    home = tmp_path / "home"
    init_home(home)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_model() -> None:
        started.set()
        await release.wait()

    async with FakeOpenAiServer() as model:
        model.reply_text("the answer", before=slow_model)
        env = {**chat_env(home, model.base_url), "KLAW__MODELS__FAKE__CONTEXTBUDGET": "50"}
        async with terminal([sys.executable, "-m", "klaw", "chat", "--skip-check"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("a question")
            async with asyncio.timeout(DEADLINE_SECONDS):
                await started.wait()
            await term.wait_for(lambda s: "-token budget (system_prompt" in s, "the warning while the spinner runs")
            during = await term.screen()
            release.set()
            screen = await term.wait_for_prompt_after("the answer", "the reply")
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
    for shown in (during, screen):
        lines = [line for line in shown.splitlines() if "-token budget (system_prompt" in line]
        assert len(lines) == 1, shown
        assert lines[0].startswith("WARNING klaw.engine.context_builder: context for chat"), shown
        assert "thinking" not in lines[0], shown
    assert "thinking" in during  # the spinner was still running below the warning
