"""An `ask` cancelled while its turn runs (`asyncio.wait_for` timing out, a task cancelled): the message
was stored, so the turn goes on to its end, and its reply, which no `ask` returns any more, reaches
`on_message` as a message on its own (decision 249), as a subagent's answer does. Before, the reply was
stored but given to nobody: the program's inbox never saw it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, AgentMessage, ChatMessage, ChatRef, FunctionModel, Klaw, TurnFailed
from tests.test_library import CONFIG


async def test_the_reply_to_a_cancelled_ask_reaches_on_message(tmp_path: Path) -> None:
    go_on = asyncio.Event()

    async def slow_model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        await go_on.wait()
        return f"late answer to {messages[-1].content}"

    inbox: asyncio.Queue[AgentMessage] = asyncio.Queue()
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(slow_model), on_message=inbox.put) as agent:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.ask("ana", "question"), 0.3)
        go_on.set()
        message = await asyncio.wait_for(inbox.get(), 10)
        assert message == AgentMessage(ChatRef("library", "ana"), "late answer to question", "reply", None)
        assert await agent.ask("ana", "again") == "late answer to again"  # the next ask gets its own reply
        assert inbox.empty()
        assert [entry.text for entry in await agent.history("ana")] == [
            "question",
            "late answer to question",
            "again",
            "late answer to again",
        ]


async def test_an_ask_whose_turn_forget_stops_ends_with_turn_failed(tmp_path: Path) -> None:
    """Decision 219: `/forget last` sent while the turn runs stops it; the `ask` waiting for its reply ends
    at once with the notice instead of waiting for a reply that will never come."""
    thinking = asyncio.Event()

    async def hanging_model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        thinking.set()
        await asyncio.Event().wait()  # never answers: only the forget ends the turn
        return "never"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(hanging_model)) as agent:
        asking = asyncio.create_task(agent.ask("ana", "my PIN is 4321"))
        await asyncio.wait_for(thinking.wait(), 10)
        forgot = await agent.ask("ana", "/forget last")
        assert forgot.startswith("Stopped the turn under way in this chat, then forgot exchange 1: 1 message(s)")
        with pytest.raises(
            TurnFailed, match=r"Stopped before answering: this conversation turn was forgotten \(erased\)\."
        ):
            await asyncio.wait_for(asking, 10)
        assert await agent.history("ana") == []
