"""Inside a subagent's run, the "unknown tool" error the model gets for a tool no one has lists the
tools that run was offered: before, it listed every tool of the model's groups, `subagent_spawn` and
`memory_save` among them, which a run is not offered (decision 249). A call to a tool the engine has
but the run was not offered gets that same answer, from the tool loop's one rule (decision 258).
Driven through a program's engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from klaw import AgentInfo, AgentMessage, ChatMessage, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
INSTRUCTION = "go and count the apples"


@dataclass(frozen=True)
class Run:
    agent: Klaw  # still open
    answer: AgentMessage  # what the run sent when it finished
    offered: tuple[str, ...]  # the tools the run's model was offered


@asynccontextmanager
async def a_subagent_run(
    home: Path, first_calls: ChatResponse, then: Callable[[Sequence[ChatMessage]], str]
) -> AsyncIterator[Run]:
    """A program's engine whose model, asked to count the apples in the background, spawns a subagent;
    the run's model makes `first_calls`, then answers `then(messages)` once the tools answered. Yields
    when the run's answer has arrived, the engine still open."""
    offered_in_run: list[tuple[str, ...]] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str | ChatResponse:
        last = messages[-1]
        if info.purpose == "subagent":
            if last.role == "tool":
                return then(messages)
            offered_in_run.append(info.tool_names)
            return first_calls
        if last.role == "tool":
            return "started"
        return tool_calls(call_tool("subagent_spawn", {"task_name": "apples", "message": INSTRUCTION}))

    inbox: asyncio.Queue[AgentMessage] = asyncio.Queue()
    async with Klaw(home, config=CONFIG, model=FunctionModel(model), on_message=inbox.put) as agent:
        assert await agent.ask("alice", "count the apples in the background") == "started"
        answer = await asyncio.wait_for(inbox.get(), 30)
        [offered] = offered_in_run
        yield Run(agent, answer, offered)


async def test_a_runs_unknown_tool_error_lists_only_the_tools_the_run_was_offered(tmp_path: Path) -> None:
    teleport = tool_calls(call_tool("teleport", {"to": "the orchard"}))

    def what_the_tool_said(messages: Sequence[ChatMessage]) -> str:
        return f"the tool said: {messages[-1].content}"

    async with a_subagent_run(tmp_path / "home", teleport, what_the_tool_said) as run:
        assert "memory_save" not in run.offered and "subagent_spawn" not in run.offered and run.offered
        assert run.answer.text == f"the tool said: unknown tool 'teleport'; available tools: {', '.join(run.offered)}"


NOT_OFFERED_IN_A_RUN = (
    ("subagent_spawn", {"task_name": "more", "message": "again"}),
    ("memory_save", {"text": "the orchard has 40 trees"}),
    ("memory_search", {"query": "apples"}),
    ("fetch_conversation_details", {"segment_id": 1}),
    ("memory_core_update", {"set": {"apples": 40}}),
)


async def test_a_run_calling_a_tool_it_was_not_offered_is_told_the_tools_it_has(tmp_path: Path) -> None:
    calls = tool_calls(*(call_tool(name, arguments) for name, arguments in NOT_OFFERED_IN_A_RUN))

    def what_the_tools_said(messages: Sequence[ChatMessage]) -> str:
        return "\n".join(str(m.content) for m in messages if m.role == "tool")

    async with a_subagent_run(tmp_path / "home", calls, what_the_tools_said) as run:
        assert await run.agent.core_memory() == {}
    assert run.offered and not {name for name, _ in NOT_OFFERED_IN_A_RUN} & set(run.offered)
    assert run.answer.text.splitlines() == [
        f"unknown tool {name!r}; available tools: {', '.join(run.offered)}" for name, _ in NOT_OFFERED_IN_A_RUN
    ]
