"""A turn still running when the engine closes, whose model then calls `subagent_spawn`: the run is not
started, and the model reads (and may tell the person) that klaw is shutting down, in words. Before,
it read `RuntimeError: the engine is shutting down and starts no new runs`, a class name in front."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls
from tests.test_library import CONFIG


async def test_a_spawn_while_the_engine_closes_is_refused_in_words(tmp_path: Path) -> None:
    asked, release = asyncio.Event(), asyncio.Event()

    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        last = messages[-1]
        if last.role == "tool":
            return f"tool said: {last.content}"
        asked.set()
        await release.wait()
        return tool_calls(call_tool("subagent_spawn", {"task_name": "apples", "message": "count the apples"}))

    agent = await Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model)).start()
    asking = asyncio.create_task(agent.ask("alice", "count the apples in the background"))
    await asyncio.wait_for(asked.wait(), 30)
    closing = asyncio.create_task(agent.aclose())
    await asyncio.sleep(0)  # the close has begun: the engine stops taking messages and starting runs at once
    release.set()
    reply = await asyncio.wait_for(asking, 60)
    await asyncio.wait_for(closing, 60)
    assert reply.startswith("tool said: klaw is shutting down, so the run of task 'apples' was not started"), reply
    assert "Error" not in reply, reply
