"""A task's run holds an LLM slot around its model calls alone, never while its tools run, and one slot of
the two is kept for people's turns: two spawned runs whose tools take minutes no longer keep another
chat's plain question waiting for them (adversary6 slot_hog, decision 297). Driven through a program's
engine, the runs' tool a real shell process waiting for a file the test writes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, AgentMessage, ChatMessage, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_runs_whose_tools_take_long_leave_the_model_to_a_person(tmp_path: Path) -> None:
    gate = tmp_path / "home" / "workspace" / "gate"  # /workspace/gate in the sandbox
    waits = "while [ ! -e /workspace/gate ]; do sleep 0.05; done; echo opened"
    tools_started: list[str] = []
    both_started = asyncio.Event()

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str | ChatResponse:
        last = messages[-1]
        if info.purpose == "subagent":
            if last.role == "tool":
                return f"run done: {last.content}"
            tools_started.append("run")
            if len(tools_started) == 2:
                both_started.set()
            return tool_calls(call_tool("code_execute", {"language": "shell", "code": waits, "timeout_seconds": 50}))
        if last.role == "tool":
            return "spawned"
        if str(last.content).startswith("spawn"):
            spawn = [call_tool("subagent_spawn", {"task_name": name, "message": "work"}) for name in ("a", "b")]
            return tool_calls(*spawn)
        return "quick answer"

    inbox: asyncio.Queue[AgentMessage] = asyncio.Queue()
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), on_message=inbox.put) as agent:
        assert await agent.ask("mallory", "spawn two") == "spawned"
        await asyncio.wait_for(both_started.wait(), 30)  # both runs asked for their slow tool
        # Before, both runs kept both slots while their tools waited: this question waited for the gate.
        assert await asyncio.wait_for(agent.ask("alice", "hello"), 30) == "quick answer"
        assert not gate.exists()
        gate.write_text("")
        answers = [await asyncio.wait_for(inbox.get(), 60) for _ in range(2)]
        assert sorted(a.task or "" for a in answers) == ["a", "b"]
        assert all(a.text.startswith("run done: exit code 0") and "opened" in a.text for a in answers)
