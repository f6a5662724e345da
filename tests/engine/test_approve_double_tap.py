"""A second bare `/approve` (a double tap, a resend) must not answer a question asked after the first one
(adversary23, decision 436): the model asked a first call, the person approved it, the model at once
asked another; the second `/approve` approved it unread. A bare answer now answers a question only if
the person's last word in the chat was not an answer given before it was asked; else it names the new
question and its id. After an ordinary message, a bare `/approve` answers again as before."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, ChatRef, ChatResponse, FunctionModel, Klaw, ManualClock, call_tool, tool_calls
from tests.test_library import CONFIG


async def test_a_second_bare_approve_does_not_answer_a_question_asked_after_the_first(tmp_path: Path) -> None:
    ran: list[str] = []

    async def host_exec(command: str) -> str:
        """Run a command on the host."""
        ran.append(command)
        return "ok"

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        results = sum(1 for m in messages[last_user:] if m.role == "tool")
        if results == 0:
            return tool_calls(call_tool("host_exec", {"command": "echo first"}))
        if results == 1 and messages[last_user].content == "go":
            return tool_calls(call_tool("host_exec", {"command": "touch PWNED"}))
        return "done"

    shown: asyncio.Queue[str] = asyncio.Queue()

    async def approve(chat: ChatRef, question: str) -> bool:
        shown.put_nowait(question)  # on the person's screen; they answer by typing
        await asyncio.Event().wait()
        return False

    config = {**CONFIG, "tools": {"approval": ["host_exec"]}, "processing": {"debounceMs": 0}}
    home = tmp_path / "home"
    clock = ManualClock()  # the questions' timeout never comes
    async with Klaw(
        home, config=config, model=FunctionModel(model), tools=[host_exec], approve=approve, clock=clock
    ) as agent:
        turn = asyncio.create_task(agent.ask("alice", "go"))
        assert "host_exec" in await asyncio.wait_for(shown.get(), 10)
        assert await agent.ask("alice", "/approve") == "Approved: host_exec runs now."
        assert "host_exec" in await asyncio.wait_for(shown.get(), 10)
        for verb in ("approve", "deny"):  # the second tap, either way, answers nothing
            said = await agent.ask("alice", f"/{verb}")
            assert said.startswith("Not answered: a new question (host_exec, "), said
            assert f"answer /{verb} " in said
        assert ran == ["echo first"]
        request_id = said.rsplit(" ", 1)[1].rstrip(".")
        assert await agent.ask("alice", f"/approve {request_id}") == "Approved: host_exec runs now."
        assert await asyncio.wait_for(turn, 10) == "done"
        assert ran == ["echo first", "touch PWNED"]

        # A new message of the person's: a bare /approve answers the question that follows it.
        turn = asyncio.create_task(agent.ask("alice", "again"))
        assert "host_exec" in await asyncio.wait_for(shown.get(), 10)
        assert await agent.ask("alice", "/approve") == "Approved: host_exec runs now."
        assert await asyncio.wait_for(turn, 10) == "done"
        assert ran == ["echo first", "touch PWNED", "echo first"]
