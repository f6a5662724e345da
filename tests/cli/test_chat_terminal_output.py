"""`klaw chat` and the terminal it shares with the shell: a long reply reaches the screen whole however
slowly the terminal takes it, the shell gets its terminal back as it was, and a paste made while klaw
starts is not cut by the terminal's line mode (tests/cli/test_chat_terminal.py has the harness)."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import DEADLINE_SECONDS, Terminal, chat_env, init_home, needs_tmux, terminal

WORDS = " ".join(f"w{n:05d}" for n in range(3000))  # 20,999 characters, the last word w02999
# ~6k tokens of words: a context budget that holds them whole beside the system prompt and tools (a message over
# the budget is cut in the model's context, decision 488; these tests are about the terminal, not the budget).
WHOLE = {"KLAW__MODELS__FAKE__CONTEXTBUDGET": "32768"}


async def paste(term: Terminal, text: str, workdir: Path) -> None:
    """Paste `text` as a terminal does (bracketed), then press Enter."""
    source = workdir / "paste.txt"
    source.write_text(text, encoding="utf-8")
    await term.tmux("load-buffer", "-b", "paste", str(source))
    await term.tmux("paste-buffer", "-p", "-d", "-b", "paste", "-t", term.target)
    await term.tmux("send-keys", "-t", term.target, "Enter")


@needs_tmux
async def test_a_long_reply_to_a_stalled_terminal_arrives_whole_and_the_shell_gets_a_blocking_terminal(
    tmp_path: Path,
) -> None:
    """The terminal stops reading (tmux stopped for two seconds, as a slow link does) while a 21,000-character
    reply is written: all of it and the prompt after it are shown. Before, stdout shared stdin's open file,
    which uvloop had made non-blocking: the write hit EAGAIN and the rest of the reply and the prompt were
    lost. After /exit the shell's terminal is blocking again (it was left non-blocking)."""
    home = tmp_path / "home"
    init_home(home)
    mode_file = tmp_path / "stdin-blocking"
    after = f"{shlex.quote(sys.executable)} -c 'import os; print(os.get_blocking(0))' > {shlex.quote(str(mode_file))}"
    command = ["sh", "-c", f"{shlex.join([sys.executable, '-m', 'klaw', 'chat'])}; status=$?; {after}; exit $status"]
    async with (
        FakeOpenAiServer() as model,
        terminal(command, {**chat_env(home, model.base_url), **WHOLE}, tmp_path) as term,
    ):
        await term.wait_for_prompt_after("Type /help for commands", "the greeting")
        server_pid = int((await term.tmux("display-message", "-p", "#{pid}")).strip())
        await paste(term, WORDS, tmp_path)
        os.kill(server_pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(2)  # the reply is written meanwhile, into a terminal that takes nothing
        finally:
            os.kill(server_pid, signal.SIGCONT)
        screen = await term.wait_for(lambda s: s.count("w02999") >= 2 and s.rstrip().endswith("you ›"), "the reply")
        assert screen.index("echo: w00000") < screen.rindex("w02999")
        await term.type_line("/exit")
        assert await term.exit_status() == 0
    assert mode_file.read_text(encoding="utf-8") == "True\n"


@needs_tmux
async def test_a_paste_made_while_klaw_starts_is_sent_whole(tmp_path: Path) -> None:
    """The model check at start is slow (the server holds its model list): a 20,999-character paste and Enter
    made meanwhile reach the model whole once the chat is ready. Before, the terminal's line mode cut it at
    4,095 characters and the cut text was sent without a word."""
    home = tmp_path / "home"
    init_home(home)
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()

    async with FakeOpenAiServer() as model:
        model.latency = slow
        async with terminal(
            [sys.executable, "-m", "klaw", "chat"], {**chat_env(home, model.base_url), **WHOLE}, tmp_path
        ) as term:
            async with asyncio.timeout(DEADLINE_SECONDS):
                while not any(r.path == "/v1/models" for r in model.requests):  # noqa: ASYNC110 - another process
                    await asyncio.sleep(0.05)
            await paste(term, WORDS, tmp_path)
            await asyncio.sleep(0.5)  # the terminal hands the keys over before the check ends
            release.set()
            await term.wait_for(lambda s: "echo: w00000" in s and s.rstrip().endswith("you ›"), "the reply")
            await term.type_line("/exit")
            assert await term.exit_status() == 0
        assert [r.body["messages"][-1]["content"] for r in model.chat_requests] == [WORDS]
