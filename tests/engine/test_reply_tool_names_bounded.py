"""A reply names its turn's tool calls, bounded whatever the model called (engine/tools_used.py): a tool
name of a megabyte, or hundreds of calls with long names, once made the reply too large for a socket frame (the turn
failed, its answer never came), and two such replies made the chat's `history` too large to answer, so
the web page could no longer load it. Over the engine socket, with the fake OpenAI server as the model."""

from __future__ import annotations

import asyncio

from klaw.engine.frames import QueryFrame, ResultFrame, tools_used
from klaw.engine.tools_used import MAX_NAME_CHARS, MAX_RUNS
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine.test_forget_what_was_sent import CHAT, DEBOUNCE_SECONDS, Running, home, running

__all__ = ["home"]  # the fixture


async def _turn(r: Running, server: FakeOpenAiServer, msg_id: str, calls: list[tuple[str, str]]) -> tuple[str, ...]:
    """The reply's text and tools for one turn making `calls`, then answering."""
    server.reply_tool_calls(calls)
    server.reply_text(f"the answer to {msg_id}")
    await r.send(msg_id, "hi")
    await r.clock.advance(DEBOUNCE_SECONDS)
    frames = await asyncio.wait_for(r.outbound_until(msg_id), 60)
    assert [(f.kind, f.text) for f in frames] == [("reply", f"the answer to {msg_id}")]
    return frames[-1].tools


async def test_a_tool_name_of_a_megabyte_is_shown_cut_and_the_answer_arrives(home: KlawHome) -> None:
    async with FakeOpenAiServer() as server, running(home, server) as r:
        tools = await _turn(r, server, "m-1", [("n" * 1_100_000, "{}"), ("n" * 1_100_000, "{}")])
        assert tools == ("n" * (MAX_NAME_CHARS - 1) + "… ×2 (not offered)",)


async def test_hundreds_of_calls_are_named_up_to_a_dozen_runs_then_counted(home: KlawHome) -> None:
    async with FakeOpenAiServer() as server, running(home, server) as r:
        calls = [("t" * 5000, "{}"), ("u" * 5000, "{}")] * 120  # 1.2 MB of names, each call a run of its own
        tools = await _turn(r, server, "m-1", calls)
        cut = ["t" * (MAX_NAME_CHARS - 1) + "… (not offered)", "u" * (MAX_NAME_CHARS - 1) + "… (not offered)"]
        assert tools == (*cut * (MAX_RUNS // 2), f"… and {240 - MAX_RUNS} more calls")
        assert tools_used(tools).startswith(f"Tools used: {cut[0]}, {cut[1]}, {cut[0]}")


async def test_the_history_of_replies_with_huge_tool_names_still_loads_and_names_them_as_the_reply_did(
    home: KlawHome,
) -> None:
    async with FakeOpenAiServer() as server, running(home, server) as r:
        live = [await _turn(r, server, f"m-{n}", [(f"{n}" * 700_000, "{}"), ("current_time", "{}")]) for n in range(2)]
        chat = {"channel": CHAT.channel, "chat_id": CHAT.chat_id}
        await r.gateway.send(QueryFrame(id="q1", query="history", params=chat))
        answer = await asyncio.wait_for(r.gateway.recv(), 30)
        assert isinstance(answer, ResultFrame), answer
        replies = [m for m in answer.data["messages"] if m["role"] == "assistant"]
        assert [m["text"] for m in replies] == ["the answer to m-0", "the answer to m-1"]
        assert [tuple(m["tools"]) for m in replies] == live
        assert live[1] == ("1" * (MAX_NAME_CHARS - 1) + "… (not offered)", "current_time")
        assert answer.data["complete"] is True
