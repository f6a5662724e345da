"""A plain `def` in `tools=` is a tool, run in a worker thread so its blocking work does not stop the
engine (as pydantic-ai runs one); before, it was refused at start: "tool 't_sync' must be an async def
function". Decision 293."""

from __future__ import annotations

import asyncio
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


gate = threading.Event()
blocked = threading.Semaphore(0)


def wait_for_gate(n: int) -> str:
    """Wait for the gate, as a read from a hung server does.

    Args:
        n: which call this is
    """
    blocked.release()
    gate.wait(120)
    return f"done {n}"


def hogging_model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if messages[-1].role == "tool":
        return "all done"
    if "wait" in (messages[-1].content or ""):
        return tool_calls(*(call_tool("wait_for_gate", {"n": n}) for n in range(8)))
    return "hello bob"


async def test_plain_def_tools_blocked_in_one_chat_leave_every_other_chat_answering(tmp_path: Path) -> None:
    """Eight plain tools blocked at once (more than asyncio's shared pool has workers on this machine)
    leave another chat's turn to be answered at once: they run in threads of their own, not in the pool
    every turn reads its prompt files and memory through (adversary7: bob waited 58 s)."""
    async with Klaw(
        tmp_path / "home", config=CONFIG, model=FunctionModel(hogging_model), tools=[wait_for_gate],
        clock=ManualClock(),
    ) as agent:  # fmt: skip
        ana = asyncio.create_task(agent.ask("ana", "wait for the gate"))
        try:
            for _ in range(8):  # each call started (with the shared pool, the last two never do: 10 s each)
                await asyncio.to_thread(blocked.acquire, True, 10)
            async with asyncio.timeout(60):  # safety net: with the pool starved, bob waited for the gate
                assert await agent.ask("bob", "hi") == "hello bob"
            assert not ana.done()
        finally:
            gate.set()
        assert await ana == "all done"
