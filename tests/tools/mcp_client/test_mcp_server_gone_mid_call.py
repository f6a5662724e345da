"""An MCP server that goes in the middle of a call (newcomer22, decision 514): a real server written with the
`mcp` SDK (gallery_server.py) started by the engine over stdio, the model the fake OpenAI-protocol server.

A tool calling `sys.exit(3)` leaves the SDK's server process lingering with its stdout open, and a server
killed with signal 9 closes it: either way the call ends well before its 30 s `timeoutSeconds` with words
saying the server stopped and klaw restarts it, not "did not answer … abandoned". The next call waits for
the restart instead of being refused with "klaw retries in 0 s" or "still starting"."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.engine.harness import Harness, running_engine
from tests.tools.mcp_client.test_mcp_tools_in_turns import status, tool_result

SERVER = str(Path(__file__).with_name("gallery_server.py"))
GALLERY = {"servers": {"gallery": {"command": sys.executable, "args": [SERVER]}}, "startWaitSeconds": 60}
ENABLED = {"enabled": ["mcp:gallery"]}


async def call(h: Harness, tool: str, arguments: dict[str, str], *, advance: float = 0.0) -> str:
    """One turn whose model calls `tool`; the engine's clock moved `advance` seconds once the call is asked
    for (a restart's backoff runs on it). The tool's result, as the model read it."""
    h.server.reply_tool_calls([(f"gallery__{tool}", arguments)])
    h.server.reply_text("done")
    before, asked = len(h.delivered), len(h.server.chat_requests)
    await h.say(f"call {tool}")
    await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
    if advance:
        async with asyncio.timeout(30):
            while len(h.server.chat_requests) <= asked:  # noqa: ASYNC110 - the model asked for the call
                await asyncio.sleep(0.02)
        await h.clock.advance(advance)
    await h.wait_for_replies(before + 1)
    return tool_result(h)


async def test_a_tool_calling_sys_exit_ends_its_call_at_once_and_the_next_call_waits_for_the_restart(
    tmp_path: Path,
) -> None:
    async with running_engine(tmp_path, tools=ENABLED, mcp=GALLERY) as h:
        said = await call(h, "fail", {})
        assert "the MCP server 'gallery' stopped" in said and "during the call to fail" in said, said
        assert said.endswith("which did not complete; klaw is restarting it"), said
        assert "did not answer fail within" not in said, said
        assert await call(h, "ok", {}, advance=1.0) == "gallery ok"


async def test_a_server_killed_mid_call_ends_its_call_at_once_and_the_next_call_waits_for_the_restart(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "gallery.pid"
    async with running_engine(tmp_path, tools=ENABLED, mcp=GALLERY) as h:
        h.server.reply_tool_calls([("gallery__wait", {"marker": str(marker)})])
        h.server.reply_text("done")
        await h.say("wait")
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        async with asyncio.timeout(30):
            while not marker.exists() or not marker.read_text():  # noqa: ASYNC110 - the server is in the call
                await asyncio.sleep(0.02)
        os.kill(int(marker.read_text()), signal.SIGKILL)
        await h.wait_for_replies(1)
        said = tool_result(h)
        assert said.startswith("the MCP server 'gallery' stopped during the call to wait"), said
        assert said.endswith("which did not complete; klaw is restarting it"), said
        shown = " ".join((await status(h)).split())  # the process's exit, seen too, words nothing else
        assert "MCP gallery: unavailable, it stopped during a call (its error output: " in shown, shown
        assert await call(h, "ok", {}, advance=1.0) == "gallery ok"


async def test_an_image_a_tool_returns_reaches_the_model_named_with_its_true_size(tmp_path: Path) -> None:
    """klaw has no image path (its messages to the model are text): the model reads the image's type and size,
    the size of the PNG itself (it read 72 bytes for this 70-byte one: the base64 padding counted), as
    docs/mcp.md's table says."""
    async with running_engine(tmp_path, tools=ENABLED, mcp=GALLERY) as h:
        assert await call(h, "picture", {}) == "[image image/png, 70 bytes, not shown]"
    docs = (Path(__file__).parents[3] / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert "| an image (`Image(...)`, `ImageContent`) | `[image image/png, 70 bytes, not shown]`" in docs


ONCE = {"servers": {"once": {"command": sys.executable, "args": [str(Path(__file__).with_name("one_call_server.py"))]}}}


async def test_a_server_that_exits_right_after_answering_is_shown_stopped_at_once_not_ready(tmp_path: Path) -> None:
    """The answer and the process's end reach klaw together, while the call's race is still ending its watch
    (decision 521): the call has its answer, and /status says the server stopped, not "ready" until the next
    call finds it gone; that call waits for the restart and is answered."""
    async with running_engine(tmp_path, tools={"enabled": ["mcp:once"]}, mcp=ONCE) as h:

        async def last(advance: float = 0.0) -> str:
            h.server.reply_tool_calls([("once__last", {})])
            h.server.reply_text("done")
            before, asked = len(h.delivered), len(h.server.chat_requests)
            await h.say("call last")
            await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
            if advance:
                async with asyncio.timeout(30):
                    while len(h.server.chat_requests) <= asked:  # noqa: ASYNC110 - the model asked for the call
                        await asyncio.sleep(0.02)
                await h.clock.advance(advance)
            await h.wait_for_replies(before + 1)
            return tool_result(h)

        assert (await last()).startswith("my last answer ...")
        shown = " ".join((await status(h)).split())
        assert "MCP once: ready" not in shown, shown
        assert "MCP once: unavailable, it stopped (it exited with status 0) (its error output: " in shown, shown
        assert (await last(advance=1.0)).startswith("my last answer ...")
