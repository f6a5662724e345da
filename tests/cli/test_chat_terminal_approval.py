"""`klaw chat` asks the person before a held tool runs: the spinner stops, the question shows the call
literally, `approve? [y/N]` takes the answer in the same terminal while the turn waits for it, and the
tool runs only on "y" (a real process in tmux, the model a `FakeOpenAiServer`, `file_write` held).

The chat runs as on a busy machine: prompt_toolkit's stdout flush thread runs half a second late
(`sitecustomize.py` in the chat's PYTHONPATH), as on the loaded CI runner where the question was once not
on screen when the prompt was. The question must be there no later than the prompt that asks about it:
printed through that thread, it came only after the prompt was drawn."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import PROMPT, chat_env, init_home, needs_tmux, terminal

APPROVE = "approve? [y/N] › "
QUESTION = "The agent wants to run file_write:"
# Loaded in the chat process at start: prompt_toolkit's StdoutProxy thread writes each batch 0.5 s late,
# looking for a running prompt (to write above it) only then, as a thread scheduled late does.
LATE_FLUSH_THREAD = """
import time
from prompt_toolkit.patch_stdout import StdoutProxy

_write_and_flush = StdoutProxy._write_and_flush


def _late(self, loop, text):
    time.sleep(0.5)
    _write_and_flush(self, self._get_app_loop(), text)


StdoutProxy._write_and_flush = _late
"""


def busy_machine(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """`env` with a sitecustomize.py that delays prompt_toolkit's flush thread (LATE_FLUSH_THREAD)."""
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(LATE_FLUSH_THREAD, encoding="utf-8")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))}


def hold_file_write(home: Path) -> None:
    config = home / "engine.yaml"
    text = config.read_text(encoding="utf-8")
    assert "  approval: [host_exec]" in text
    config.write_text(text.replace("  approval: [host_exec]", "  approval: [file_write]"), encoding="utf-8")


@needs_tmux
async def test_the_console_asks_y_or_n_and_runs_the_tool_only_on_yes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        model.reply_tool_calls([("file_write", {"path": "kept.txt", "content": "yes please"})])
        model.reply_text("Wrote kept.txt.")
        model.reply_tool_calls([("file_write", {"path": "refused.txt", "content": "no thanks"})])
        model.reply_text("I did not write it.")
        env = busy_machine(chat_env(home, model.base_url), tmp_path)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")

            await term.type_line("note that I said yes")
            screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the approval prompt")
            assert QUESTION in screen  # as soon as the prompt shows, the question is above it
            assert "path: kept.txt" in screen and "content: yes please" in screen
            assert not (home / "workspace" / "kept.txt").exists()  # held until the answer
            await term.type_line("y")
            await term.wait_for_prompt_after("Wrote kept.txt.", "the reply after approving")
            assert "Approved: file_write runs now." in await term.screen()
            assert (home / "workspace" / "kept.txt").read_text(encoding="utf-8") == "yes please"

            await term.type_line("note that I said no")
            screen = await term.wait_for(lambda s: s.count(APPROVE.rstrip()) == 2, "the second approval prompt")
            assert screen.count(QUESTION) == 2
            await term.type_line("")  # Enter alone is no
            await term.wait_for_prompt_after("I did not write it.", "the reply after denying")
            screen = await term.screen()
            assert "Denied: file_write will not run." in screen
            # the denied call is marked as the web API marks it (decision 312); before: "Tools used: file_write"
            assert "Tools used: file_write (denied)\nI did not write it." in screen, screen
            assert "Tools used: file_write\nWrote kept.txt." in screen, screen  # the approved one ran
            assert not (home / "workspace" / "refused.txt").exists()
            assert "Traceback" not in await term.screen()
            assert (await term.screen()).rstrip().endswith(PROMPT.rstrip())


@needs_tmux
async def test_control_codes_in_a_tool_call_or_a_reply_are_shown_not_obeyed(tmp_path: Path) -> None:
    """Arguments that erase their own line ("ESC[2K CR") cannot hide behind "hello world" in the question,
    a reply that would clear the screen and set the window title does neither, and `/approve`, which
    the question offers, is a yes at the prompt."""
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        hidden = "RM -RF EVERYTHING\x1b[2K\rhello world"
        model.reply_tool_calls([("file_write", {"path": "evil.txt", "content": hidden})])
        model.reply_text("Done.\x1b]0;PWNED-TITLE\x07\x1b[2J")
        env = busy_machine(chat_env(home, model.base_url), tmp_path)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("write it")
            screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the approval prompt")
            assert "content: RM -RF EVERYTHING⟦U+001B⟧[2K⟦U+000D⟧hello world" in screen  # named (decision 295)
            await term.type_line("/approve")
            screen = await term.wait_for_prompt_after("Done.", "the reply after approving")
            assert "Approved: file_write runs now." in screen
            assert "Type /help for commands" in screen  # the screen was not cleared
            assert "Done.␛]0;PWNED-TITLE␇␛[2J" in screen
            title = await term.tmux("display-message", "-p", "-t", term.target, "#{pane_title}")
            assert "PWNED" not in title
    assert (home / "workspace" / "evil.txt").read_bytes() == b"RM -RF EVERYTHING\x1b[2K\rhello world"


@needs_tmux
async def test_an_approval_left_unanswered_ends_its_prompt_at_the_timeout_and_the_reply_follows(
    tmp_path: Path,
) -> None:
    """Before, `approve? [y/N]` stayed up after the timeout had denied the call, showing nothing; the reply
    came only once something was typed, after `No approval request '…' is waiting`."""
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        model.reply_tool_calls([("file_write", {"path": "late.txt", "content": "too late"})])
        model.reply_text("Nobody answered, so I did not write it.")
        env = {**chat_env(home, model.base_url), "KLAW__TOOLS__APPROVALTIMEOUTSECONDS": "3"}
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("write late.txt")
            screen = await term.wait_for_prompt_after(
                "Nobody answered, so I did not write it.", "the reply after the question timed out, untouched"
            )
            said = "No answer within 3 seconds: file_write was not run."
            assert f"{APPROVE.rstrip()}\n{said}\nTools used: file_write (denied)\n" in screen, screen
            assert "No approval request" not in screen and "Traceback" not in screen
            assert not (home / "workspace" / "late.txt").exists()
            model.reply_text("Yes?")
            await term.type_line("y")  # a late y is an ordinary message now, not an answer to nothing
            await term.wait_for_prompt_after("Yes?", "the reply to the late y")
            assert "No approval request" not in await term.screen()


@needs_tmux
async def test_a_question_a_restart_asks_again_gets_its_y_n_prompt_and_ctrl_c_there_denies(tmp_path: Path) -> None:
    """newcomer18: the turn a restart resumed asked again as lines under `you ›`, so the `y` the console had
    taught went to the engine as a message, which waited behind the question for its whole timeout; and
    Ctrl-C at `approve? [y/N]` (in a task of its own) stopped klaw chat with a traceback, exit 130, where
    it should deny and the chat go on (docs/tools.md). A chat killed at its question, then started again."""
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    call = ("file_write", {"path": "a.txt", "content": "a"})
    async with FakeOpenAiServer() as model:
        model.reply_tool_calls([call])  # the first run's turn, killed at its question
        model.reply_tool_calls([call])  # the same message answered again at the restart: asked again
        model.reply_text("I did not write it.")
        env = chat_env(home, model.base_url)
        (tmp_path / "first").mkdir()
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "first") as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("write a.txt")
            await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the approval prompt")
            shell = int(await term.tmux("display-message", "-p", "-t", term.target, "#{pane_pid}"))
            [chat] = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
            os.kill(int(chat), signal.SIGKILL)
            assert await term.exit_status() == 128 + signal.SIGKILL
        (tmp_path / "second").mkdir()
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "second") as term:
            screen = await term.wait_for(
                lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the y/N prompt of the question asked again"
            )
            assert QUESTION in screen and "path: a.txt" in screen
            await term.tmux("send-keys", "-t", term.target, "C-c")
            screen = await term.wait_for_prompt_after("I did not write it.", "the reply after Ctrl-C denied")
            assert "Denied: file_write will not run." in screen, screen
            model.reply_text("Still here.")
            await term.type_line("still there?")  # the chat goes on
            screen = await term.wait_for_prompt_after("Still here.", "the next reply")
            assert "Traceback" not in screen and "stopping" not in screen, screen
    assert not (home / "workspace" / "a.txt").exists()
    told = [m for r in model.chat_requests for m in r.body["messages"] if m.get("role") == "tool"]
    assert "(it was never approved)" in told[0]["content"], told  # the killed run's question (decision 447)
    assert told[-1]["content"].startswith("Not run: the person denied file_write"), told
    assert "Traceback" not in (home / "logs" / "chat.log").read_text(encoding="utf-8")
