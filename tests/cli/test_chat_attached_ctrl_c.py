"""Ctrl-C in a `klaw chat` attached to a running `klaw serve` cancels the chat's running turn, as in process
(decision 496; decision 490 left it: the terminal left and the turn went on): the terminal asks the engine on
engine.sock (the `cancel_turn` query), the tool's program is stopped, the turn closed as `failed`, the
message kept, the same words shown, and the chat goes on; a second Ctrl-C before the cancel is done leaves,
and the engine goes on."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from klaw.engine.frames import QueryFrame, ResultFrame
from klaw.engine.stopped_turns import CANCELLED
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import USER, chat_env, init_home, needs_tmux, terminal
from tests.cli.ctrl_c_turn import (
    SLEEP,
    assert_the_cancelled_turn_was_logged,
    ctrl_c_again_while_cancelling,
    ctrl_c_while_the_tool_runs,
    the_chat_goes_on_and_leaves,
)
from tests.engine import GatewayClient
from tests.serve_helpers import running, web_page

CHAT = [sys.executable, "-m", "klaw", "chat"]
ATTACHED = "attached to the running engine"


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


@asynccontextmanager
async def _serving(
    home: Path,
) -> AsyncIterator[tuple[FakeOpenAiServer, dict[str, str], asyncio.subprocess.Process]]:
    """`klaw serve` on a new home with the fake model, once its web page is up; the chat's environment."""
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            yield model, env, serve


@needs_tmux
async def test_ctrl_c_in_an_attached_chat_cancels_the_engines_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with _serving(home) as (model, env, serve):
        nothing = await _ask(home, "cancel_turn", {"channel": "console", "chat_id": USER})
        assert nothing.data == {"cancelled": False}, nothing  # nothing under way: nothing stopped
        unnamed = await _ask(home, "cancel_turn", {})
        assert unnamed.error == "name the chat: channel and chat_id", unnamed
        model.reply_tool_calls([("code_execute", SLEEP)])
        async with terminal(CHAT, env, tmp_path) as term:
            await term.wait_for_prompt_after(ATTACHED, "the banner and the prompt")
            await ctrl_c_while_the_tool_runs(term, model)
            screen = await term.wait_for_prompt_after("Cancelled: this turn was stopped", "the cancelled turn")
            assert " ".join(CANCELLED.split()[:12]) in " ".join(screen.split())
            assert "Left; the engine goes on" not in screen and "Traceback" not in screen
            assert serve.returncode is None  # the engine runs on
            await the_chat_goes_on_and_leaves(term, model)
        assert len(model.chat_requests) == 2  # the cancelled turn never asked the model again
        assert serve.returncode is None
    assert_the_cancelled_turn_was_logged(home)


@needs_tmux
async def test_ctrl_c_twice_in_an_attached_chat_leaves(tmp_path: Path) -> None:
    async with _serving(tmp_path / "home") as (model, env, serve):
        model.reply_tool_calls([("code_execute", SLEEP)])
        async with terminal(CHAT, env, tmp_path) as term:
            await term.wait_for_prompt_after(ATTACHED, "the banner and the prompt")
            await ctrl_c_while_the_tool_runs(term, model)
            await ctrl_c_again_while_cancelling(term)  # exactly two presses
        assert serve.returncode is None  # leaving the terminal left the engine running
