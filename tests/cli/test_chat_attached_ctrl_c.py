"""Ctrl-C in a `klaw chat` attached to a running `klaw serve` cancels the chat's running turn, as in process
(decision 496; decision 490 left it: the terminal left and the turn went on): the terminal asks the engine on
engine.sock (the `cancel_turn` query), the tool's program is stopped, the turn closed as `failed`, the
message kept, the same words shown, and the chat goes on; a second Ctrl-C before the cancel is done leaves,
and the engine goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from klaw.engine.frames import QueryFrame, ResultFrame
from klaw.engine.stopped_turns import CANCELLED
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import USER, chat_env, init_home, needs_tmux, terminal
from tests.engine import GatewayClient
from tests.serve_helpers import running, web_page

CHAT = [sys.executable, "-m", "klaw", "chat"]
SLEEP = {"language": "shell", "code": "sleep 300; echo done"}
ATTACHED = "attached to the running engine"


def _records(home: Path) -> list[dict[str, object]]:
    logs = sorted((home / "conversations").glob(f"console_{USER}/*.jsonl"))
    return [json.loads(line) for path in logs for line in path.read_text(encoding="utf-8").splitlines()]


async def _ask(home: Path, query: str, params: dict[str, object]) -> ResultFrame:
    """One query on engine.sock, as another program would ask it."""
    client = await GatewayClient.connect(KlawHome(home).socket_path)
    try:
        await client.send(QueryFrame(id="q", query=query, params=params))
        while not isinstance(answer := await client.recv(), ResultFrame):
            pass
        return answer
    finally:
        await client.aclose()


@needs_tmux
async def test_ctrl_c_in_an_attached_chat_cancels_the_engines_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            nothing = await _ask(home, "cancel_turn", {"channel": "console", "chat_id": USER})
            assert nothing.data == {"cancelled": False}, nothing  # nothing under way: nothing stopped
            unnamed = await _ask(home, "cancel_turn", {})
            assert unnamed.error == "name the chat: channel and chat_id", unnamed
            model.reply_tool_calls([("code_execute", SLEEP)])
            async with terminal(CHAT, env, tmp_path) as term:
                await term.wait_for_prompt_after(ATTACHED, "the banner and the prompt")
                await term.type_line("run the long thing")
                await term.wait_for(lambda s: "thinking" in s and len(model.chat_requests) == 1, "the tool running")
                await term.tmux("send-keys", "-t", term.target, "C-c")
                screen = await term.wait_for_prompt_after("Cancelled: this turn was stopped", "the cancelled turn")
                assert " ".join(CANCELLED.split()[:12]) in " ".join(screen.split())
                assert "Left; the engine goes on" not in screen and "Traceback" not in screen
                assert serve.returncode is None  # the engine runs on
                await term.type_line("and now?")  # the chat goes on: the next message is answered
                await term.wait_for_prompt_after("echo: and now?", "the next reply")
                sent = model.chat_requests[-1].body["messages"]
                assert {"role": "user", "content": "run the long thing"} in sent  # the cancelled message is kept
                await term.tmux("send-keys", "-t", term.target, "C-c")  # at an empty prompt: leave
                assert await term.exit_status() == 0
            assert len(model.chat_requests) == 2  # the cancelled turn never asked the model again
            assert serve.returncode is None
    said = [(r["role"], r.get("content")) for r in _records(home) if r["type"] == "text"]
    assert said[0] == ("user", "run the long thing") and ("assistant", "echo: and now?") in said
    closes = [r for r in _records(home) if "status" in str(r.get("metadata"))]
    assert closes and "'failed'" in str(closes[0]["metadata"]), closes  # closed: never answered again at a start


@needs_tmux
async def test_ctrl_c_twice_in_an_attached_chat_leaves(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_tool_calls([("code_execute", SLEEP)])
            async with terminal(CHAT, env, tmp_path) as term:
                await term.wait_for_prompt_after(ATTACHED, "the banner and the prompt")
                await term.type_line("run the long thing")
                await term.wait_for(lambda s: "thinking" in s and len(model.chat_requests) == 1, "the tool running")
                await term.tmux("send-keys", "-t", term.target, "C-c")
                await term.wait_for(lambda s: "cancelling this turn" in s or "Cancelled: this turn" in s, "the cancel")
                await term.tmux("send-keys", "-t", term.target, "C-c")  # exactly two presses
                status = await term.exit_status()  # left while the cancel ran (130), or at the prompt after it (0)
                screen = await term.screen()
                assert status in (0, 130), screen
                assert "Traceback" not in screen
            assert serve.returncode is None  # leaving the terminal left the engine running
