"""One model answer runs at most `tools.maxCallsPerResponse` tool calls (decision 284): a model, or one an
injected instruction steers, that answered with 2,500 calls once had all of them run (over 10 s) and their
results fill the chat's history. The first calls run; each of the rest gets a result saying it was not run
and why, so every call still has its result and the model can go on. The reply's "Tools used" line marks
the calls not run, and a tool the model invented that it was never offered. Through the engine, with the
fake OpenAI server as the model over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from klaw.engine.frames import QueryFrame, ResultFrame, tools_used
from klaw.engine.tools_used import MAX_RUNS
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine.harness import Harness, running_engine
from tests.engine.test_forget_what_was_sent import CHAT, home, running
from tests.engine.test_reply_tool_names_bounded import _turn

__all__ = ["home"]  # the fixture

DEFAULT_LIMIT = 32


def _tool_results(h: Harness) -> list[dict[str, Any]]:
    """The tool results the model was sent with its last request."""
    return [m for m in h.last_request_messages() if m.get("role") == "tool"]


def _not_run(limit: int, asked: int) -> str:
    return (
        f"Not run: this answer asked for {asked} tool calls and klaw runs at most {limit} from one answer"
        f" (tools.maxCallsPerResponse in engine.yaml). The first {limit} ran; ask again for what is still needed."
    )


async def test_an_answer_of_2500_calls_runs_the_first_32_and_tells_the_model_why_the_rest_did_not(
    tmp_path: Path,
) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("current_time", {})] * 2500)
        h.server.reply_text("It is noon.")
        reply = await h.turn("what time is it?")
        assert reply.text == "It is noon."
        results = _tool_results(h)
        assert len(results) == 2500  # every call has its result: the protocol holds
        ran = [r for r in results if not r["content"].startswith("Not run")]
        assert len(ran) == DEFAULT_LIMIT
        assert [r["content"] for r in results[DEFAULT_LIMIT:]] == [_not_run(DEFAULT_LIMIT, 2500)] * 2468
        assert reply.tools == (f"current_time ×{DEFAULT_LIMIT}", "current_time ×2468 (not run)")


async def test_the_limit_is_a_setting_and_calls_within_it_all_run(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"maxCallsPerResponse": 2}) as h:
        h.server.reply_tool_calls([("current_time", {})] * 2)
        h.server.reply_tool_calls([("current_time", {}), ("memory_search", {"query": "x"}), ("current_time", {})])
        h.server.reply_text("done")
        reply = await h.turn("go")
        assert reply.text == "done"
        results = _tool_results(h)
        assert len(results) == 5
        assert [r["content"] == _not_run(2, 3) for r in results] == [False, False, False, False, True]
        assert tools_used(reply.tools) == ("Tools used: current_time ×3, memory_search, current_time (not run)")


async def test_a_tool_the_model_invented_is_marked_not_offered(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("launch_rockets", {}), ("current_time", {})])
        h.server.reply_text("I cannot launch rockets.")
        reply = await h.turn("launch the rockets")
        assert reply.text == "I cannot launch rockets."
        assert tools_used(reply.tools) == "Tools used: launch_rockets (not offered), current_time"


async def test_the_history_marks_the_calls_as_the_reply_did(home: KlawHome) -> None:
    async with FakeOpenAiServer() as server, running(home, server) as r:
        calls = [("launch_rockets", "{}")] + [("current_time", "{}")] * (DEFAULT_LIMIT + 2)
        live = await _turn(r, server, "m-1", calls)
        ran = f"current_time ×{DEFAULT_LIMIT - 1}"
        assert live == ("launch_rockets (not offered)", ran, "current_time ×3 (not run)")
        chat = {"channel": CHAT.channel, "chat_id": CHAT.chat_id}
        await r.gateway.send(QueryFrame(id="q1", query="history", params=chat))
        answer = await asyncio.wait_for(r.gateway.recv(), 30)
        assert isinstance(answer, ResultFrame), answer
        replies = [m for m in answer.data["messages"] if m["role"] == "assistant"]
        assert [tuple(m["tools"]) for m in replies] == [live]


async def test_hundreds_of_marked_runs_stay_bounded(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"maxCallsPerResponse": 1}) as h:
        h.server.reply_tool_calls([("x" * 100, {}), ("y" * 100, {})] * 100)
        h.server.reply_text("ok")
        reply = await h.turn("go")
        assert len(reply.tools) == MAX_RUNS + 1
        assert reply.tools[-1] == f"… and {200 - MAX_RUNS} more calls"
        assert reply.tools[0].endswith("… (not offered)")
