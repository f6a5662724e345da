"""A URL MCP server that compresses its answers though klaw asks for none: gzip and deflate are unpacked (the
model client's bounded unpacking, klaw/unpacking.py) and its tools answer; a gzip bomb is cut at 16 MB counted
unpacked, worded, with the engine's memory bounded, and a new session answers the next call; br is refused by
name. Before, every compressed answer was refused at its first bytes (decision 309; now decision 342).

The engine and the fake model server in this process; the MCP server is a real one (the SDK's, behind a
middleware compressing its answers: tests/tools/mcp_client/compressing_http_server.py) in a subprocess."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.engine.harness import CHAT, Harness, running_engine
from tests.tools.mcp_client.http_skeleton import started
from tests.tools.mcp_client.test_mcp_http_answer_cap import MB, peak_memory, peak_memory_reset, resident, stats


def tool_result(h: Harness) -> str:
    message = h.last_request_messages()[-1]
    assert message["role"] == "tool"
    return " ".join(str(message["content"]).split())


async def status(h: Harness) -> str:
    return " ".join(((await h.engine.submit(CHAT, "/status")).command_reply or "").split())


async def test_gzip_and_deflate_answers_are_read_a_bomb_is_cut_unpacked_and_br_is_refused_by_name(
    tmp_path: Path,
) -> None:
    fast = {"debounceMs": 100}  # a turn moves the clock 0.1 s, short of the first backoff (1 s)
    async with started("tests.tools.mcp_client.compressing_http_server") as base:
        codings = ("gzip", "deflate", "br")
        servers = {coding: {"url": f"{base}/{coding}/mcp", "timeoutSeconds": 20} for coding in codings}
        mcp = {"servers": servers, "startWaitSeconds": 60}
        tools = {"enabled": ["mcp:gzip", "mcp:deflate", "mcp:br"]}
        async with running_engine(tmp_path, tools=tools, mcp=mcp, processing=fast) as h:
            for coding in ("gzip", "deflate"):
                h.server.reply_tool_calls([(f"{coding}__ok", {})])
                h.server.reply_text("answered")
                assert (await h.turn(f"{coding}?")).text == "answered"
                assert tool_result(h) == "fine", tool_result(h)

            said = await status(h)
            assert (
                "MCP br: unavailable, it failed to start: the server sent its answer in a compression klaw cannot undo"
                " (br); klaw asks for answers uncompressed and undoes gzip and deflate only: turn the server's"
                " (or its proxy's) compression off, or to gzip"
            ) in said, said

            before = resident()
            peak_memory_reset()
            h.server.reply_tool_calls([("gzip__bomb", {})])
            h.server.reply_text("it flooded")
            assert (await asyncio.wait_for(h.turn("bomb"), 50)).text == "it flooded"
            grown = peak_memory() - before
            assert tool_result(h) == (
                "the MCP server 'gzip' sent an answer longer than 16 MB (klaw's limit for one answer, its"
                " notifications included) during the call to bomb, which did not complete; klaw ended its session"
                " and is starting a new one"
            ), tool_result(h)
            assert (await stats(base))["gone"] == 1
            assert grown < 48 * MB, f"the engine's memory grew {grown / MB:.0f} MB reading a gzip bomb"

            link = h.engine.mcp_servers.links["gzip"]
            async with asyncio.timeout(30):
                await link.down.wait()
                await h.clock.advance(1.0)
                await link.ready.wait()
            h.server.reply_tool_calls([("gzip__ok", {})])
            h.server.reply_text("back")
            assert (await h.turn("ok?")).text == "back"
            assert tool_result(h) == "fine"
