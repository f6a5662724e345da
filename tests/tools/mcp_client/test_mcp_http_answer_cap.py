"""A streamable-HTTP MCP server whose answer never ends (a JSON body, or server-sent events, without end): klaw
reads 16 MB of it at most, the call's result and `/status` say why, the server's session ends and a new one
serves the next call. Before, the SDK read the JSON body into memory until the call's timeout (96 MB here,
all the server sent) and the call only said the server did not answer (decision 309).

The engine and the fake model server in this process; the MCP server is a real one (the SDK's, behind a
middleware answering the flood tools: tests/tools/mcp_client/endless_http_server.py) in a subprocess, which
counts the bytes it handed to the connection and sees klaw hang up. This process's peak memory is measured
around the call (Linux's VmHWM, reset through /proc/self/clear_refs)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from tests.engine.harness import CHAT, Harness, running_engine
from tests.tools.mcp_client.http_skeleton import started

MB = 1024 * 1024
FLOOD = 96 * MB  # what the server offers per flood (endless_http_server.FLOOD_BYTES)


async def stats(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        answer: dict[str, Any] = (await client.get(f"{base}/stats")).json()
        return answer


def peak_memory_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # the peak resident size starts again from the current


def peak_memory() -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def resident() -> int:
    return int(re.search(r"VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024  # type: ignore[union-attr]


def tool_result(h: Harness) -> str:
    message = h.last_request_messages()[-1]
    assert message["role"] == "tool"
    return " ".join(str(message["content"]).split())


async def back_again(h: Harness) -> None:
    """The link's backoff (1 s on the engine's clock), then its new session serves a call."""
    link = h.engine.mcp_servers.links["endless"]
    async with asyncio.timeout(30):
        await link.down.wait()
        await h.clock.advance(1.0)
        await link.ready.wait()
    h.server.reply_tool_calls([("endless__ok", {})])
    h.server.reply_text("back")
    assert (await h.turn("ok?")).text == "back"
    assert tool_result(h) == "fine"


async def test_an_http_server_answering_without_end_is_cut_at_16_mb_named_and_started_again(tmp_path: Path) -> None:
    fast = {"debounceMs": 100}  # a turn moves the clock 0.1 s, short of the first backoff (1 s)
    async with started("tests.tools.mcp_client.endless_http_server") as base:
        # timeoutSeconds well short of the test's net: on the old code the call ended there, unworded. 45 s, not
        # 20: under CI's load reading 16 MB of SSE events took longer than 20 s once (the call ended unworded)
        mcp = {"servers": {"endless": {"url": f"{base}/mcp", "timeoutSeconds": 45}}, "startWaitSeconds": 60}
        async with running_engine(tmp_path, tools={"enabled": ["mcp:endless"]}, mcp=mcp, processing=fast) as h:
            for tool, flood in enumerate(("flood_json", "flood_events"), start=1):
                before = resident()
                peak_memory_reset()
                h.server.reply_tool_calls([(f"endless__{flood}", {})])
                h.server.reply_text("it flooded")
                assert (await asyncio.wait_for(h.turn(flood), 90)).text == "it flooded"
                grown = peak_memory() - before
                said = tool_result(h)
                assert said == (
                    "the MCP server 'endless' sent an answer longer than 16 MB (klaw's limit for one answer, its"
                    " notifications included)"
                    f" during the call to {flood}, which did not complete; klaw ended its session and is starting"
                    " a new one"
                ), said
                reply = (await h.engine.submit(CHAT, "/status")).command_reply or ""
                assert "MCP endless: unavailable, it sent an answer longer than 16 MB" in " ".join(reply.split())
                # klaw hung up after ~16 MB (plus what the sockets hold): the server never sent all it had
                seen = await stats(base)
                assert seen["gone"] == tool, seen
                assert seen["sent"] < 48 * MB, seen
                assert grown < 48 * MB, f"the engine's memory grew {grown / MB:.0f} MB reading {flood}"
                await back_again(h)
