"""`klaw chat` in tmux, where something is wrong: log lines go to KLAW_HOME/logs/chat.log from before the
engine starts (an MCP server that cannot start is not printed raw above the banner), and a model that
never answers shows the wait counted and bounded, then one apology."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, needs_tmux, poll_until, terminal


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
    assert "MCP server 'NOTES' cannot start: there is no program '/nonexistent/mcp-notes'" in log


@needs_tmux
async def test_a_model_that_never_answers_shows_the_wait_then_one_apology(tmp_path: Path) -> None:
    """The server takes the request and says nothing: the spinner counts the seconds and says how long klaw
    waits; at timeoutSeconds the turn ends with an apology naming it, the request never sent again."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_hang()
        env = {
            **chat_env(home, model.base_url),
            "KLAW__MODELS__FAKE__TIMEOUTSECONDS": "9",
            "KLAW__MODELS__FAKE__MAXRETRIES": "3",  # a timeout is not retried whatever this says
        }
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            await term.type_line("are you there?")
            screen = await term.wait_for(
                lambda s: "klaw gives up after 9 s without a word from FAKE" in s, "the spinner's count"
            )
            assert "thinking… " in screen
            screen = await term.wait_for_prompt_after("the server sent nothing for 9 s", "the apology")
            assert "timeoutSeconds under models.FAKE" in " ".join(screen.split())
            assert len(model.chat_requests) == 1
            await term.type_line("/exit")
            assert await term.exit_status() == 0


def _chat_pid(shell_pid: int) -> int:
    """The `klaw chat` process: the only child of the pane's shell."""
    [child] = Path(f"/proc/{shell_pid}/task/{shell_pid}/children").read_text(encoding="utf-8").split()
    return int(child)


async def _killed_while_the_model_thinks(model: FakeOpenAiServer, env: dict[str, str], workdir: Path) -> None:
    """A `klaw chat` asked a question, SIGKILLed once the model has the request (which hangs)."""
    async with terminal([sys.executable, "-m", "klaw", "chat"], env, workdir) as term:
        await term.wait_for_prompt_after("Type /help for commands", "the greeting")
        await term.type_line("a question the crash leaves unanswered")
        await poll_until(lambda: _some(len(model.chat_requests) == 1), lambda: term.failure("the model got no request"))
        shell = int((await term.tmux("display-message", "-p", "-t", term.target, "#{pane_pid}")).strip())
        os.kill(_chat_pid(shell), signal.SIGKILL)
        await term.exit_status()


@needs_tmux
async def test_a_message_resumed_after_a_crash_is_logged_not_printed_above_the_banner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    for name in ("t1", "t2"):
        (tmp_path / name).mkdir()
    async with FakeOpenAiServer() as model:
        model.reply_hang()
        env = chat_env(home, model.base_url)
        await _killed_while_the_model_thinks(model, env, tmp_path / "t1")
        model.reply_text("here at last")
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "t2") as term:
            screen = await term.wait_for_prompt_after("here at last", "the resumed message's reply")
            before_banner = screen.split("klaw — model")[0]
            assert "resuming" not in before_banner and "WARNING" not in before_banner, screen
            # the screen says it ("a message from before klaw last stopped"): no pointer at the log (decision 473)
            assert "klaw logged a warning" not in screen, screen
            await term.type_line("/exit")
            assert await term.exit_status() == 0
    assert "resuming 1 message(s) left unanswered by the previous run" in (home / "logs" / "chat.log").read_text()


@needs_tmux
async def test_a_resumed_reply_arriving_while_the_next_message_waits_is_said_to_answer_the_earlier_one(
    tmp_path: Path,
) -> None:
    """The resumed turn's reply comes while the spinner waits for the new message's: it is labelled as a
    reply to a message from before, not shown as if it answered the new one (a newcomer's trial)."""
    home = tmp_path / "home"
    init_home(home)
    for name in ("t1", "t2"):
        (tmp_path / name).mkdir()
    asked_again = asyncio.Event()

    async def until_the_person_asks_again() -> None:
        await asked_again.wait()

    async with FakeOpenAiServer() as model:
        model.reply_hang()
        env = chat_env(home, model.base_url)
        await _killed_while_the_model_thinks(model, env, tmp_path / "t1")
        model.reply_text("the late answer", before=until_the_person_asks_again)
        model.reply_text("yes, I am back")
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "t2") as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            await term.type_line("are you back?")
            await term.wait_for(lambda s: "thinking…" in s, "the spinner")
            asked_again.set()
            screen = await term.wait_for_prompt_after("yes, I am back", "both replies")
            after_question = screen.split("are you back?")[1]
            assert after_question.index("Reply to a message from before klaw last stopped:") < after_question.index(
                "the late answer"
            ), screen
            await term.type_line("/exit")
            assert await term.exit_status() == 0


async def _some(found: bool) -> bool | None:
    return True if found else None


@needs_tmux
async def test_a_reply_a_crash_left_unshown_is_shown_at_the_next_chat_said_as_such(tmp_path: Path) -> None:
    """The reply was stored but the process died before it was noted as shown (decision 101): the next
    `klaw chat` shows it after the banner, saying it answers a message from before, and only once."""
    from klaw import ChatRef
    from tests.cli.chat_terminal import USER
    from tests.test_library_agent_messages import cut_off_after_the_reply

    home = tmp_path / "home"
    init_home(home)
    for name in ("t1", "t2"):
        (tmp_path / name).mkdir()
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        await asyncio.to_thread(cut_off_after_the_reply, home, ChatRef("console", USER), env)
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "t1") as term:
            screen = await term.wait_for_prompt_after("the answer the crash hid", "the reply sent again")
            after_banner = screen.split("klaw — model")[1]
            assert "Reply to a message from before klaw last stopped:" in after_banner, screen
            await term.type_line("/exit")
            assert await term.exit_status() == 0
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "t2") as term:
            screen = await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            await term.type_line("/exit")
            assert await term.exit_status() == 0
            assert "the answer the crash hid" not in screen


@needs_tmux
async def test_a_paste_too_long_for_one_message_is_refused_and_the_prompt_comes_back(tmp_path: Path) -> None:
    """A person pastes a 100,001-character text (tmux's paste-buffer, bracketed as a terminal pastes) and
    presses Enter: one red line says how long it is and what to do, nothing reaches the model or the log,
    and the next message works."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        async with terminal([sys.executable, "-m", "klaw", "chat"], chat_env(home, model.base_url), tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting")
            pasted = tmp_path / "paste.txt"
            pasted.write_text("lorem " * 16_666 + "ipsum", encoding="utf-8")  # 100,001 characters
            await term.tmux("load-buffer", "-b", "big", str(pasted))
            await term.tmux("paste-buffer", "-p", "-d", "-b", "big", "-t", term.target)
            await term.tmux("send-keys", "-t", term.target, "Enter")
            screen = await term.wait_for_prompt_after("Not sent: the message is 100,001 characters", "the refusal")
            assert "put the text in a file in the workspace" in screen  # rich wraps the rest at 160 columns
            await term.tmux("send-keys", "-t", term.target, "C-l")  # clear the screen of the pasted text
            await term.type_line("a short one")
            await term.wait_for_prompt_after("echo: a short one", "the reply to the next message")
            await term.type_line("/exit")
            assert await term.exit_status() == 0
            assert "Traceback" not in await term.screen()
        assert [r.body["messages"][-1]["content"] for r in model.chat_requests] == ["a short one"]
    logs = "".join(p.read_text(encoding="utf-8") for p in (home / "conversations").rglob("*.jsonl"))
    assert "lorem" not in logs and "a short one" in logs
