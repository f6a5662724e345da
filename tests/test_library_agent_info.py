"""What a program's `FunctionModel` is told and what the person is shown of it: `AgentInfo.turn_round`
counts the requests of one turn (before, only `round`, counting every request the model ever answered,
was there), `/status` names the function answering for the configured model (before: only the
configured id, e.g. "Model: ollama/llama3.2"), and the approval question for a tool without arguments
says so (before: a bare `{}` in a code block). Decision 293."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, ChatRef, ChatResponse, FunctionModel, Klaw, ManualClock, call_tool, tool_calls
from tests.test_library import CONFIG


async def roll() -> str:
    """Roll a die."""
    return "4"


def dice(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if info.turn_round == 1:
        return tool_calls(call_tool("roll", {}))
    return f"rolled {messages[-1].content}"


async def test_turn_round_counts_the_requests_of_one_turn_and_status_names_the_function(tmp_path: Path) -> None:
    model = FunctionModel(dice)
    config = {**CONFIG, "tools": {"enabled": []}}  # the program's own tools are offered still
    async with Klaw(tmp_path / "home", config=config, model=model, tools=[roll], clock=ManualClock()) as agent:
        assert await agent.ask("ana", "roll") == "rolled 4"
        assert await agent.ask("ana", "again") == "rolled 4"
        status = await agent.ask("ana", "/status")
    assert [(call.info.round, call.info.turn_round) for call in model.calls] == [(1, 1), (2, 2), (3, 1), (4, 2)]
    assert re.search(r"^Model: \S+ \(answered by function:dice, the program's own model\)$", status, re.M), status


async def test_the_approval_question_for_a_tool_without_arguments_says_so(tmp_path: Path) -> None:
    asked: list[str] = []

    async def approve(chat: ChatRef, question: str) -> bool:
        asked.append(question)
        return False

    config = {**CONFIG, "tools": {"enabled": [], "approval": ["roll"]}}
    model = FunctionModel(dice)
    async with Klaw(tmp_path / "home", config=config, model=model, tools=[roll], approve=approve) as agent:
        await agent.ask("ana", "roll")
    assert asked == ["The agent wants to run roll (no arguments)."]
