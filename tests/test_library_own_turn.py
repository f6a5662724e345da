"""A program's tool that holds the `Klaw` and calls it back: asking its own chat, or closing the engine,
while its turn runs is refused at once in words the model reads (`OwnTurnRunning`, decision 322);
asking another chat is allowed. Before, the tool's ask waited for the turn waiting for the tool until the
tool timeout (60 s), its message answered later to no one, and `aclose` from a tool waited for itself.
A chain of asks that comes back to a chat whose turn waits (A's tool asks B, B's asks A) is refused the
same way, and a slash command that waits on no turn (`/status`) is answered (decision 331)."""

from __future__ import annotations

import asyncio
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
    if text.startswith("relay to "):  # "relay to bob" asks bob "inner please"; "relay to bob: QUESTION" asks QUESTION
        target, _, question = text.removeprefix("relay to ").partition(": ")
        return tool_calls(call_tool("relay", {"chat": target, "question": question or "inner please"}))
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


async def test_a_loop_of_asks_through_two_chats_is_refused_at_once(tmp_path: Path) -> None:
    """alice's tool asks bob, whose tool asks alice: alice's turn waits for its tool, which waits for bob's
    turn. Before, bob's ask queued behind alice's turn until the 60-second tool timeout."""
    async with Klaw(
        tmp_path / "home", config=CONFIG, model=FunctionModel(model), tools=[relay], clock=ManualClock()
    ) as agent:
        agents.append(agent)
        reply = await asyncio.wait_for(agent.ask("alice", "relay to bob: relay to alice"), 30)  # a safety net
        assert reply == (
            "tool said: tool said: OwnTurnRunning: a tool of library:bob cannot ask library:alice while"
            " library:alice's turn runs: that turn waits, through its tool's ask, for this one (library:alice →"
            " library:bob → library:alice), so the message would wait behind it; return what the tool found and"
            " let the model answer"
        ), reply
        assert "inner please" not in [entry.text for entry in await agent.history("alice")]
        # Three chats round: carol's tool asks alice, who waits through bob.
        reply = await asyncio.wait_for(agent.ask("alice", "relay to bob: relay to carol: relay to alice"), 30)
        assert "(library:alice → library:bob → library:carol → library:alice)" in reply, reply
        # Once the asks have returned, nothing waits: bob's tool may ask alice again.
        assert await agent.ask("bob", "relay to alice") == "tool said: answer to inner please"


async def test_a_command_that_waits_on_no_turn_is_answered_to_a_tool_of_its_own_chat(tmp_path: Path) -> None:
    """`/status` and `/tools` are answered at once without the chat's turn lock, as when the person types
    them during a turn; `/forget` (which stops and waits for the turn) and `/approve` are still refused."""
    async with Klaw(
        tmp_path / "home", config=CONFIG, model=FunctionModel(model), tools=[relay], clock=ManualClock()
    ) as agent:
        agents.append(agent)
        status = await agent.ask("alice", "relay to alice: /status")
        assert status.startswith("tool said: Uptime: "), status
        assert "Model: " in status
        forget = await agent.ask("alice", "relay to alice: /forget exchange 1")
        assert forget.startswith(
            "tool said: OwnTurnRunning: a tool cannot ask /forget of its own chat (library:alice) while its turn"
            " runs: /forget stops the turn under way and waits for it"
        ), forget
        approve = await agent.ask("alice", "relay to alice: /approve")
        assert "OwnTurnRunning: a tool cannot ask /approve of its own chat" in approve, approve
        assert (await agent.ask("alice", "relay to bob: /status")).startswith("tool said: Uptime: ")
        # a skill's call is a message with a turn (decision 529): refused of the tool's own chat, asked of another's
        skill = tmp_path / "home" / "workspace" / "skills" / "weather-report"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text("---\nname: weather-report\ndescription: Weather.\n---\nCity: $1\n", "utf-8")
        called = await agent.ask("alice", "relay to alice: /weather-report Oslo")
        assert "OwnTurnRunning: a tool cannot ask its own chat (library:alice) while its turn runs" in called, called
        other = await agent.ask("alice", "relay to bob: /weather-report Oslo")
        assert other == "tool said: answer to /weather-report Oslo", other
