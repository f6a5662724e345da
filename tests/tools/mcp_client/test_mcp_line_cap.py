"""A stdio MCP server that writes without ever ending a line: its connection ends at klaw's cap for one
line, the call's result says so, and the server is restarted. Before, the SDK's reader re-scanned the
growing output at every read until the call's timeout (~1.4 CPUs of the engine, every other chat ten
times slower; adversary6 mcp_stall.py), and the result only said the server did not answer (decision 298).
The engine, the fake model server and a real server process (tests/tools/mcp_client/flooding_server.py)."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from tests.engine.harness import CHAT, Harness, running_engine

SERVER = str(Path(__file__).with_name("flooding_server.py"))
MCP = {
    "servers": {"flood": {"command": sys.executable, "args": [SERVER], "timeoutSeconds": 60}},
    "startWaitSeconds": 60,
}


def tool_result(h: Harness) -> str:
    message = h.last_request_messages()[-1]
    assert message["role"] == "tool"
    return str(message["content"])


async def test_a_server_writing_an_endless_line_is_stopped_named_and_restarted(tmp_path: Path) -> None:
    fast = {"debounceMs": 100}  # a turn moves the clock 0.1 s, short of the first backoff (1 s)
    async with running_engine(tmp_path, tools={"enabled": ["mcp:flood"]}, mcp=MCP, processing=fast) as h:
        h.server.reply_tool_calls([("flood__boom", {})])
        h.server.reply_text("it flooded")
        # Before: the call ran to its 60 s timeout, the engine re-scanning the output all along.
        assert (await asyncio.wait_for(h.turn("boom"), 50)).text == "it flooded"
        said = tool_result(h)
        assert "the MCP server 'flood' wrote a line longer than 16 MB (klaw's limit for one message)" in said
        assert said.endswith("during the call to boom, which did not complete; klaw stopped it and is restarting it")
        reply = (await h.engine.submit(CHAT, "/status")).command_reply or ""
        assert "MCP flood: unavailable" in reply and "wrote a line longer than 16 MB" in reply

        link = h.engine.mcp_servers.links["flood"]
        async with asyncio.timeout(30):
            await link.down.wait()  # stopped (its stdin closed, then SIGTERM): its backoff has begun
            await h.clock.advance(1.0)  # the backoff's wait, on the engine's clock
            await link.ready.wait()
        h.server.reply_tool_calls([("flood__ok", {})])
        h.server.reply_text("back")
        assert (await h.turn("ok?")).text == "back"
        assert tool_result(h) == "fine"


async def test_a_server_printing_its_log_to_stdout_is_answered_and_said_once_without_the_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the SDK's parser logged each line at ERROR with a traceback quoting it (adversary12)."""
    caplog.set_level(logging.DEBUG)
    async with running_engine(tmp_path, tools={"enabled": ["mcp:flood"]}, mcp=MCP) as h:
        h.server.reply_tool_calls([("flood__chatty", {})])
        h.server.reply_text("it talked")
        assert (await h.turn("talk")).text == "it talked"
        assert tool_result(h) == "fine"
    logged = [record for record in caplog.records if "flood" in record.getMessage() or "mcp" in record.name]
    assert not any("secret_token" in record.getMessage() or record.exc_info for record in caplog.records)
    assert not any("sk-live" in text for text in caplog.text.splitlines())
    stray = [record for record in logged if "not a JSON-RPC message" in record.getMessage()]
    assert len(stray) == 1 and stray[0].levelno == logging.WARNING
    assert stray[0].getMessage().startswith("the MCP server 'flood' wrote to its stdout a line that is not")


async def test_a_result_of_too_many_items_is_cut_and_one_too_deep_is_said_at_once(tmp_path: Path) -> None:
    """adversary27 M2: 200,000 content items held the event loop ~19 s (pydantic's parse, the SDK's two
    validations); L2: a message nested 100,000 deep was dropped as a stray line and its call waited out its
    whole timeout (60 s here) to say the server did not answer (decision 478)."""
    async with running_engine(tmp_path, tools={"enabled": ["mcp:flood"]}, mcp=MCP) as h:
        h.server.reply_tool_calls([("flood__many", {})])
        h.server.reply_text("cut")
        assert (await h.turn("many")).text == "cut"
        said = tool_result(h)
        assert said.startswith("a\na\n") and said.count("a\n") == 1000
        assert said.endswith(
            "[klaw kept the first 1,000 of the 200,000 content items this tool's result had; the rest were left out]"
        )

        h.server.reply_tool_calls([("flood__deep", {})])
        h.server.reply_text("deep")
        assert (await asyncio.wait_for(h.turn("deep"), 50)).text == "deep"
        assert tool_result(h) == (
            "the MCP server 'flood' answered with a message klaw could not read (nested deeper than the 200 levels"
            " klaw reads) during the call to deep, which did not complete; klaw stopped it and is restarting it"
        )
