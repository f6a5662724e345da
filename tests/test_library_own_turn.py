"""A program's tool that holds the `Klaw` and calls it back: asking its own chat, or closing the engine,
while its turn runs is refused at once in words the model reads (`OwnTurnRunning`, decision 322);
asking another chat is allowed. Before, the tool's ask waited for the turn waiting for the tool until the
tool timeout (60 s), its message answered later to no one, and `aclose` from a tool waited for itself."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, ChatResponse, FunctionModel, Klaw, ManualClock, call_tool, tool_calls
from tests.test_library import CONFIG

agents: list[Klaw] = []


async def relay(chat: str, question: str) -> str:
    """Ask the agent, in a chat, a question.

    Args:
        chat: which chat to ask
        question: what to ask
    """
    return await agents[-1].ask(chat, question)


async def closer() -> str:
    """Close the engine."""
    await agents[-1].aclose()
    return "closed"


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    last = messages[-1]
    text = last.content or ""
    if last.role == "tool":
        return f"tool said: {text}"
    if text.startswith("relay to "):
        return tool_calls(call_tool("relay", {"chat": text.removeprefix("relay to "), "question": "inner please"}))
    if text == "close":
        return tool_calls(call_tool("closer", {}))
    return f"answer to {text}"


async def test_a_tool_asking_its_own_chat_is_refused_and_another_chat_is_asked(tmp_path: Path) -> None:
    async with Klaw(
        tmp_path / "home", config=CONFIG, model=FunctionModel(model), tools=[relay], clock=ManualClock()
    ) as agent:
        agents.append(agent)
        refused = await agent.ask("alice", "relay to alice")
        assert refused.startswith(
            "tool said: OwnTurnRunning: a tool cannot ask its own chat (library:alice) while its turn runs"
        ), refused
        assert "inner please" not in [entry.text for entry in await agent.history("alice")]  # nothing stored
        assert await agent.ask("alice", "relay to bob") == "tool said: answer to inner please"
        assert [entry.text for entry in await agent.history("bob")] == ["inner please", "answer to inner please"]
        assert await agent.ask("alice", "still here?") == "answer to still here?"


async def test_closing_the_engine_from_a_tool_is_refused_and_the_agent_goes_on(tmp_path: Path) -> None:
    async with Klaw(
        tmp_path / "home", config=CONFIG, model=FunctionModel(model), tools=[closer], clock=ManualClock()
    ) as agent:
        agents.append(agent)
        refused = await agent.ask("alice", "close")
        assert refused.startswith("tool said: OwnTurnRunning: a tool cannot close the engine from inside a tool"), (
            refused
        )
        assert await agent.ask("alice", "still open?") == "answer to still open?"
