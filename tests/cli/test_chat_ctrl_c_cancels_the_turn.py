"""Ctrl-C in `klaw chat` while a turn runs cancels that turn, as in most chat CLIs (newcomer20, decision
490): the tool's program is stopped, the turn closed, the person back at `you ›` with the message kept; a
second Ctrl-C while the cancel is under way quits as before, and Ctrl-C at an empty prompt leaves. Before,
the first Ctrl-C waited out a 20 s `sleep` and dropped the person at the shell."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import Terminal, chat_env, greeted_chat, init_home, needs_tmux
from tests.cli.ctrl_c_turn import (
    SLEEP,
    assert_the_cancelled_turn_was_logged,
    ctrl_c_again_while_cancelling,
    ctrl_c_while_the_tool_runs,
    the_chat_goes_on_and_leaves,
)


@asynccontextmanager
async def _chat_asked_for_a_long_tool_run(
    home: Path, workdir: Path
) -> AsyncIterator[tuple[FakeOpenAiServer, Terminal]]:
    """`klaw chat` in process on a new home, at its prompt; the model asks for the long `sleep` at the first
    message."""
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_tool_calls([("code_execute", SLEEP)])
        async with greeted_chat(env, workdir) as term:
            yield model, term


@needs_tmux
async def test_ctrl_c_during_a_long_tool_run_cancels_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with _chat_asked_for_a_long_tool_run(home, tmp_path) as (model, term):
        await ctrl_c_while_the_tool_runs(term, model)
        screen = await term.wait_for_prompt_after("Cancelled: this turn was stopped", "the cancelled turn")
        assert "your message is kept" in screen
        assert "stopping: finishing the reply in flight" not in screen
        assert "Traceback" not in screen
        await the_chat_goes_on_and_leaves(term, model)
    assert len(model.chat_requests) == 2  # the cancelled turn never asked the model again
    assert_the_cancelled_turn_was_logged(home)
    assert not (home / "engine.sock").exists()  # shut down, not killed


@needs_tmux
async def test_ctrl_c_twice_while_a_turn_runs_quits(tmp_path: Path) -> None:
    async with _chat_asked_for_a_long_tool_run(tmp_path / "home", tmp_path) as (model, term):
        await ctrl_c_while_the_tool_runs(term, model)
        await ctrl_c_again_while_cancelling(term)


async def _chat_pid(term: Terminal) -> int:
    """The `klaw chat` process: the child of the shell tmux runs in the pane."""
    shell = int((await term.tmux("display-message", "-p", "-t", term.target, "#{pane_pid}")).strip())
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text(encoding="ascii").split()
    assert len(children) == 1, children
    return int(children[0])


@needs_tmux
async def test_a_sigint_at_the_prompt_is_the_prompts_ctrl_c(tmp_path: Path) -> None:
    """A Ctrl-C that reaches `you ›` as a signal (the terminal in its line mode while something is printed above
    the prompt, or before the prompt took the terminal) is the prompt's Ctrl-C key (decision 496): it clears a
    typed line and leaves from an empty one. prompt_toolkit's own handler left whatever was typed."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        async with greeted_chat(env, tmp_path) as term:
            await term.tmux("send-keys", "-t", term.target, "-l", "half a thought")
            await term.wait_for(lambda s: s.rstrip().endswith("half a thought"), "the typed line")
            chat = await _chat_pid(term)
            os.kill(chat, signal.SIGINT)
            await term.wait_for(lambda s: s.rstrip().endswith("you ›"), "the line cleared")
            assert not term.status_file.exists()  # still there
            os.kill(chat, signal.SIGINT)  # on the empty line: leave
            assert await term.exit_status() == 0
            assert "Traceback" not in await term.screen()
        assert not model.chat_requests
