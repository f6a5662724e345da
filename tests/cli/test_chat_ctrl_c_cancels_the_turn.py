"""Ctrl-C in `klaw chat` while a turn runs cancels that turn, as in most chat CLIs (newcomer20, decision
490): the tool's program is stopped, the turn closed, the person back at `you ›` with the message kept; a
second Ctrl-C while the cancel is under way quits as before, and Ctrl-C at an empty prompt leaves. Before,
the first Ctrl-C waited out a 20 s `sleep` and dropped the person at the shell."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import USER, Terminal, chat_env, init_home, needs_tmux, terminal

SLEEP = {"language": "shell", "code": "sleep 300; echo done"}


def _records(home: Path) -> list[dict[str, object]]:
    logs = sorted((home / "conversations").glob(f"console_{USER}/*.jsonl"))
    return [json.loads(line) for path in logs for line in path.read_text(encoding="utf-8").splitlines()]


@needs_tmux
async def test_ctrl_c_during_a_long_tool_run_cancels_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_tool_calls([("code_execute", SLEEP)])
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("run the long thing")
            await term.wait_for(lambda s: "thinking" in s and len(model.chat_requests) == 1, "the tool running")
            await term.tmux("send-keys", "-t", term.target, "C-c")
            screen = await term.wait_for_prompt_after("Cancelled: this turn was stopped", "the cancelled turn")
            assert "your message is kept" in screen
            assert "stopping: finishing the reply in flight" not in screen
            assert "Traceback" not in screen
            await term.type_line("and now?")  # the chat goes on: the next message is answered
            await term.wait_for_prompt_after("echo: and now?", "the next reply")
            sent = model.chat_requests[-1].body["messages"]
            assert {"role": "user", "content": "run the long thing"} in sent  # the cancelled message is kept
            await term.tmux("send-keys", "-t", term.target, "C-c")  # at an empty prompt: leave
            assert await term.exit_status() == 0
        assert len(model.chat_requests) == 2  # the cancelled turn never asked the model again
    said = [(r["role"], r.get("content")) for r in _records(home) if r["type"] == "text"]
    assert said[0] == ("user", "run the long thing") and ("assistant", "echo: and now?") in said
    closes = [r for r in _records(home) if "status" in str(r.get("metadata"))]
    assert closes and "'failed'" in str(closes[0]["metadata"]), closes  # closed: never answered again at a start
    assert not (home / "engine.sock").exists()  # shut down, not killed


@needs_tmux
async def test_ctrl_c_twice_while_a_turn_runs_quits(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        model.reply_tool_calls([("code_execute", SLEEP)])
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
            await term.type_line("run the long thing")
            await term.wait_for(lambda s: "thinking" in s and len(model.chat_requests) == 1, "the tool running")
            await term.tmux("send-keys", "-t", term.target, "C-c")
            # The second press once the first was taken, as a person presses again on seeing it: two signals
            # the kernel has not delivered yet are one. Exactly two presses (decision 496: in CI110 one landing
            # as the prompt took the terminal was lost, and the test pressed a third time): the second quits
            # while the cancel runs (130), or, the cancel done, is the prompt's Ctrl-C on an empty line (0),
            # wherever it lands between the turn's end and the prompt.
            await term.wait_for(lambda s: "cancelling this turn" in s or "Cancelled: this turn" in s, "the cancel")
            await term.tmux("send-keys", "-t", term.target, "C-c")
            status = await term.exit_status()
            screen = await term.screen()
            assert status in (0, 130), screen  # quit: at once (130), or the cancel won and the prompt left (0)
            assert "Traceback" not in screen


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
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path) as term:
            await term.wait_for_prompt_after("Type /help for commands", "the greeting and the prompt")
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
