"""`klaw chat` beside a running `klaw serve` talks to it over engine.sock (decisions 430, 441).

It was refused ("talk to your agent on its web page"). One real `klaw serve` with the fake model serves
every step, as a person would meet them: a piped chat gets its reply alone on stdout, and its tool's
question is ended as one nobody can answer, as in process (decision 516: it was left open, exit 3); a
question left open by a client that went away is asked at once when a terminal (tmux) attaches (answered
elsewhere, on engine.sock, the prompt ends saying so: decision 450; a pipe beside the terminal:
tests/cli/test_chat_piped_beside_terminal.py, decision 527), chats,
runs a slash command, approves a held tool, denies one with Ctrl-C (as in process), cancels a turn with
Ctrl-C (decision 496: tests/cli/test_chat_attached_ctrl_c.py) and leaves; a reply made while no terminal was
attached is shown at the next attach under its label (the left-open message's reply, which came while one
was, is not); a
`kill -9` of the engine while a question waits ends its y/N prompt, saying the tool did not run, and the
restarted engine's answer is shown; what is typed while the engine is down is kept, and a `klaw chat`
started alone once the service stays down sends it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from klaw.channels.console_attached import (
    BACK,
    ENGINE_DOWN,
    KEPT,
    OPEN_QUESTION,
    QUESTION_GONE,
    WENT_AWAY,
    WHILE_AWAY,
)
from klaw.channels.console_kept import SENDING, KeptMessages
from klaw.engine.frames import AckFrame, InboundFrame
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import USER, chat_env, init_home, needs_tmux, terminal
from tests.cli.piped_chat import piped
from tests.cli.test_chat_piped_question_attached import NO_TERMINAL, answer_elsewhere, left_open
from tests.cli.test_chat_terminal_approval import APPROVE, QUESTION, hold_file_write
from tests.engine import GatewayClient
from tests.serve_helpers import STARTS_WITHIN, running, stop, web_page

CHAT = [sys.executable, "-m", "klaw", "chat"]


@needs_tmux
async def test_klaw_chat_attaches_to_a_running_klaw_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    hold_file_write(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_text("an answer for the pipe")
            code, out, err = await piped(env, "hello from a pipe")
            assert (code, out) == (0, "an answer for the pipe\n"), err
            assert "Traceback" not in err
            code, out, err = await piped(env, "/statsu")  # a script's typo fails, as without an engine (431)
            assert (code, out) == (1, "") and "/statsu" in err, err
            model.reply_tool_calls([("file_write", {"path": "never-piped.txt", "content": "no"})])
            model.reply_text("Not written: nobody could approve it.")
            code, out, err = await piped(env, "write it from a pipe")  # nobody can answer: ended, as in process
            assert (code, out) == (0, "Not written: nobody could approve it.\n"), err  # it left with 3 (516)
            assert NO_TERMINAL in " ".join(err.split()), err
            assert not (home / "workspace" / "never-piped.txt").exists()
            # A question left open (a client on engine.sock that left before it was asked, as a killed pipe):
            # the next terminal asks it at once.
            model.reply_tool_calls([("file_write", {"path": "piped.txt", "content": "from a pipe"})])
            model.reply_text("Wrote piped.txt.")
            request_id = await left_open(home, "write it from elsewhere")

            (tmp_path / "first").mkdir()
            async with terminal(CHAT, env, tmp_path / "first") as term:  # the pipe's question, asked at once
                screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the open question")
                assert f"`klaw serve` (pid {serve.pid})" in screen
                assert screen.index(OPEN_QUESTION) < screen.index(QUESTION) < screen.index("path: piped.txt")
                # Answered elsewhere: another program on engine.sock speaking for the console chat. The prompt
                # learns it from the engine and ends, saying how; it stayed up before (decision 450).
                await answer_elsewhere(home, "approve", request_id)
                settled = f"Answered elsewhere, not at this prompt: /approve {request_id}, so file_write runs."
                await term.wait_for(lambda s: settled in folded(s), "the question said answered elsewhere")
                screen = await term.wait_for_prompt_after("Wrote piped.txt.", "the piped message's reply")
                assert "Approved: file_write runs now." in screen
                assert WHILE_AWAY not in screen  # it came while this terminal was attached (trial48)
                assert (home / "workspace" / "piped.txt").read_text(encoding="utf-8") == "from a pipe"
                model.reply_text("an answer typed for")
                await term.type_line("hello from a terminal")
                await term.wait_for_prompt_after("an answer typed for", "the reply")
                await term.type_line("/help")
                await term.wait_for_prompt_after("/exit — Leave klaw chat", "the engine's /help")
                model.reply_tool_calls([("file_write", {"path": "kept.txt", "content": "yes please"})])
                model.reply_text("Wrote kept.txt.")
                await term.type_line("write it")
                screen = await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the approval prompt")
                assert QUESTION in screen and "path: kept.txt" in screen
                await term.type_line("y")
                await term.wait_for_prompt_after("Wrote kept.txt.", "the reply after approving")
                assert "Approved: file_write runs now." in await term.screen()
                assert (home / "workspace" / "kept.txt").read_text(encoding="utf-8") == "yes please"
                model.reply_tool_calls([("file_write", {"path": "never.txt", "content": "no"})])
                model.reply_text("Not written.")
                await term.type_line("write another")
                await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the second approval prompt")
                await term.tmux("send-keys", "-t", term.target, "C-c")  # no, as in process; the chat goes on
                screen = await term.wait_for_prompt_after("Not written.", "the reply after Ctrl-C at y/N")
                assert "Denied: file_write will not run." in screen
                assert not (home / "workspace" / "never.txt").exists()
                asked, gate = asyncio.Event(), asyncio.Event()

                async def held() -> None:
                    asked.set()
                    await gate.wait()

                model.reply_text("never written", before=held)
                await term.type_line("take your time")
                await asyncio.wait_for(asked.wait(), timeout=STARTS_WITHIN)
                await term.tmux("send-keys", "-t", term.target, "C-c")  # cancels the engine's turn (decision 496)
                await term.wait_for_prompt_after("Cancelled: this turn was stopped", "the turn cancelled")
                gate.set()
                await term.tmux("send-keys", "-t", term.target, "C-c")  # at an empty prompt: leave
                assert await term.exit_status() == 0
            assert serve.returncode is None  # leaving the terminal left the engine running
            # A reply made while no terminal is attached: the console chat's message sent by another program.
            model.reply_text("written while nobody watched")
            other = await GatewayClient.connect(KlawHome(home).socket_path)
            try:
                await other.send(InboundFrame(id="away-1", channel="console", chat_id=USER, text="take your time"))
                assert await other.recv() == AckFrame(id="away-1")
            finally:
                await other.aclose()
            async with asyncio.timeout(STARTS_WITHIN):
                while not _replied(home, "written while nobody watched"):  # noqa: ASYNC110 - another process
                    await asyncio.sleep(0.05)

            (tmp_path / "second").mkdir()
            async with terminal(CHAT, env, tmp_path / "second") as term:
                screen = await term.wait_for_prompt_after("written while nobody watched", "the reply made meanwhile")
                assert screen.index(WHILE_AWAY) < screen.index("written while nobody watched")
                model.reply_tool_calls([("file_write", {"path": "killed.txt", "content": "no"})])
                await term.type_line("write it, then the engine dies")
                await term.wait_for(lambda s: s.rstrip().endswith(APPROVE.rstrip()), "the approval prompt")
                assert await stop(serve, signal.SIGKILL) == -signal.SIGKILL
                await term.wait_for(lambda s: folded(QUESTION_GONE) in folded(s), "the question said gone")
                await term.wait_for(lambda s: ENGINE_DOWN in s, "the spinner waiting for the engine, not the model")
                model.reply_text("the answer after the restart")
                async with running(env=env, stderr=None) as again:  # systemd's restart, say
                    await web_page(again)
                    screen = await term.wait_for_prompt_after("the answer after the restart", "the resumed answer")
                    assert screen.index(QUESTION_GONE.split(":")[0]) < screen.index(BACK)
                    assert not (home / "workspace" / "killed.txt").exists()
                    assert await stop(again) == 0
                await term.wait_for(lambda s: folded(s).count(folded(WENT_AWAY)) == 2, "the engine's going again")
                assert "klaw logged" not in await term.screen()  # the going said, not pointed at (decision 464)
                await term.type_line("typed while it was down")
                await term.wait_for(lambda s: KEPT in folded(s), "the message said kept")
                await term.tmux("send-keys", "-t", term.target, "C-c")  # the service stays down: leave
                assert await term.exit_status() == 130
            model.reply_text("the kept message's answer")
            (tmp_path / "third").mkdir()
            async with terminal([*CHAT, "--skip-check"], env, tmp_path / "third") as term:  # no engine: in process
                screen = await term.wait_for_prompt_after("the kept message's answer", "the kept message answered")
                assert screen.index(SENDING) < screen.index("you › typed while it was down")
                await term.type_line("/exit")
                assert await term.exit_status() == 0
            assert await KeptMessages.open(home / "gateway") is None  # sent once: not again at the next attach
        # each console turn (the killed one twice, the pipe whose question was ended: two calls); none else twice
        assert len(model.chat_requests) == 15


def _replied(home: Path, text: str) -> bool:
    """Whether the console chat's log holds `text` as a reply."""
    for path in (home / "conversations").glob(f"console_{USER}/*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("role") == "assistant" and record.get("content") == text:
                return True
    return False


def folded(screen: str) -> str:
    """The screen's text with its white space folded: a terminal wraps a long line."""
    return " ".join(screen.split())
