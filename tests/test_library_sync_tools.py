"""A plain `def` in `tools=` is a tool, run in a worker thread so its blocking work does not stop the
engine (as pydantic-ai runs one); before, it was refused at start: "tool 't_sync' must be an async def
function". Decision 293."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from klaw import (
    AgentInfo,
    ChatMessage,
    ChatResponse,
    FunctionModel,
    Klaw,
    ManualClock,
    ToolContext,
    call_tool,
    tool_calls,
)
from tests.test_library import CONFIG

threads: list[str] = []


def lookup(ctx: ToolContext, word: str, times: int = 1) -> str:
    """Look a word up in a blocking dictionary.

    Args:
        word: the word to look up
        times: how often to say it
    """
    threads.append(threading.current_thread().name)
    return f"{word} for {ctx.chat}: " + " ".join(["a greeting"] * times)


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if messages[-1].role == "tool":
        return f"the tool said: {messages[-1].content}"
    return tool_calls(call_tool("lookup", {"word": "hello", "times": 2}))


async def test_a_plain_def_tool_is_offered_and_runs_in_a_worker_thread(tmp_path: Path) -> None:
    async with Klaw(
        tmp_path / "home", config=CONFIG, model=FunctionModel(model), tools=[lookup], clock=ManualClock()
    ) as agent:
        assert await agent.ask("ana", "what is hello?") == "the tool said: hello for library:ana: a greeting a greeting"
        offered = {row.name: row for row in await agent.tools("ana")}
        assert offered["lookup"].state == "offered"
    assert threads and threads[0] != threading.main_thread().name
