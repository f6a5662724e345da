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
from tests.cli.chat_terminal import DEADLINE_SECONDS, chat_env, init_home, needs_tmux, terminal

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
            assert "/exit — Leave klaw chat (also /quit or Ctrl-D)" in screen

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

            # Markdown joins a paragraph's lines; a reply's line breaks are shown where the model wrote them.
            model.reply_text("Roses are red\nviolets are blue\n\n```\nkeep  this\n```")
            await term.type_line("a short poem please")
            screen = await term.wait_for_prompt_after("violets are blue", "the poem")
            assert "Roses are red violets" not in screen
            shown = [line.strip() for line in screen.splitlines()]
            poem = shown.index("Roses are red")
            assert shown[poem + 1] == "violets are blue"
            assert "keep  this" in shown  # a code block's own spacing kept

            # A reply quoting a tabulate table: its rule lines are neither an empty list nor a horizontal rule.
            model.reply_text("name    size\n------  -----\na.txt   12\n\nx  y\n-  -\n1  2")
            await term.type_line("the files please")
            screen = await term.wait_for_prompt_after("1  2", "the tables")
            shown = [line.strip() for line in screen.splitlines()]
            first = shown.index("name    size")
            assert shown[first : first + 3] == ["name    size", "------  -----", "a.txt   12"], shown[first:]
            second = shown.index("x  y", first)
            assert shown[second : second + 3] == ["x  y", "-  -", "1  2"], shown[second:]

            # A link's target is in sight (decision 431): rich drew "[text](url)" as the text alone.
            model.reply_text("Read [the backup recipe](https://example.com/backup) or <https://example.com/faq>.")
            await term.type_line("where is the recipe")
            screen = await term.wait_for_prompt_after("the backup recipe", "the reply with links")
            said = " ".join(screen.split())
            assert "Read the backup recipe (https://example.com/backup) or https://example.com/faq." in said, screen
            assert said.count("https://example.com/faq") == 1, screen

            # Angle brackets are text (decision 463): rich draws no HTML, so web_fetch's end marker read "<<>>".
            model.reply_text("Fetched:\n<<<end of untrusted web content>>>\n<b>kept</b> as typed\n\n<div>\n</div>")
            await term.type_line("what did the page say")
            screen = await term.wait_for_prompt_after("</div>", "the reply with angle brackets")
            shown = [line.strip() for line in screen.splitlines()]
            marker = shown.index("<<<end of untrusted web content>>>")
            assert shown[marker + 1] == "<b>kept</b> as typed" and "<div>" in shown[marker:], shown[marker:]

            # A reply over 100,000 characters is shown as its text (decision 452): rich's wrapping of a long
            # paragraph costs the square of its length (a 3 MB reply: 23 s before it was all on screen).
            model.reply_text("**kept as written** " + "filler " * 15_000 + "\nthe last line")
            await term.type_line("print the big file")
            screen = await term.wait_for_prompt_after("the last line", "the long reply")
            assert "**kept as written**" in screen  # before: drawn as Markdown, bold without its stars

            await term.type_line("still here?")  # the engine survived everything above
            screen = await term.wait_for_prompt_after("echo: still here?", "a reply after the commands")
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
            screen = await term.screen()
            assert "Traceback" not in screen
            assert "MarkupError" not in screen


@needs_tmux
async def test_a_warning_logged_while_the_model_thinks_goes_to_the_log_file(tmp_path: Path) -> None:
    """A prompt file leading outside the workspace is logged during the turn, while the spinner runs. The
    warning is written to KLAW_HOME/logs/chat.log (0600), not between the question and the answer; the screen
    gets one line saying where it is, printed above the spinner, whole, never glued to "thinking…". (It was a
    context over its budget; that is told in the chat now and logged to the file only: decision 473.)"""
    home = tmp_path / "home"
    init_home(home)
    (home / "workspace" / "AGENTS.md").unlink()
    (home / "workspace" / "AGENTS.md").symlink_to(home / "engine.yaml")
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_model() -> None:
        started.set()
        await release.wait()

    async with FakeOpenAiServer() as model:
        model.reply_text("the answer", before=slow_model)
        model.reply_text("the second answer")
        env = chat_env(home, model.base_url)
        async with terminal([sys.executable, "-m", "klaw", "chat", "--skip-check"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("a question")
            async with asyncio.timeout(DEADLINE_SECONDS):
                await started.wait()
            await term.wait_for(lambda s: "(klaw logged a warning: see" in s, "the pointer while the spinner runs")
            during = await term.screen()
            release.set()
            await term.wait_for_prompt_after("the answer", "the reply")
            await term.type_line("another question")  # the file still outside: logged, not pointed at twice
            screen = await term.wait_for_prompt_after("the second answer", "the second reply")
            await term.tmux("send-keys", "-t", term.target, "C-d")
            assert await term.exit_status() == 0
    log_file = home / "logs" / "chat.log"
    logged = log_file.read_text(encoding="utf-8")
    assert logged.count("AGENTS.md leads outside the workspace") == 1, logged  # read once while it lasts
    assert "a question" not in logged  # warnings, never what the person wrote
    assert log_file.stat().st_mode & 0o777 == 0o600 and log_file.parent.stat().st_mode & 0o777 == 0o700
    for shown in (during, screen):
        assert "leads outside" not in shown and "WARNING" not in shown, shown
        lines = [line for line in shown.splitlines() if "(klaw logged a warning" in line]
        assert lines == [f"(klaw logged a warning: see {log_file})"], shown
    assert "thinking" in during  # the spinner was still running below the pointer
    asked = during.index("you › a question")
    assert asked < during.index("(klaw logged a warning") < during.index("thinking"), during  # logged in the turn
