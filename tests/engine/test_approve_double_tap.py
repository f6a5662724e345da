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


async def test_after_a_restart_a_bare_approve_answers_no_question_asked_before_the_person_wrote(
    tmp_path: Path,
) -> None:
    """Decision 442: the gate keeps the person's last word in memory only. A restart ends every question
    (the close denies them), and the turn cut by it is resumed at the start, asking again before the person
    has written anything: a bare `/approve` then (a tap sent as klaw stopped, arriving late) could approve
    what nobody read. It answers nothing and names the question; its id answers it."""
    ran: list[str] = []
    stopping, did_run = True, asyncio.Event()

    async def host_exec(command: str) -> str:
        """Run a command on the host."""
        ran.append(command)
        did_run.set()
        return "ok"

    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if messages[-1].role == "tool" and messages[-1].content == "ok":
            return "done"
        if messages[-1].role == "tool" and stopping:  # "Not run: … the engine is stopping": still under way
            await asyncio.Event().wait()
        return tool_calls(call_tool("host_exec", {"command": "touch PWNED"}))

    shown: asyncio.Queue[str] = asyncio.Queue()

    async def approve(chat: ChatRef, question: str) -> bool:
        shown.put_nowait(question)
        await asyncio.Event().wait()
        return False

    config = {**CONFIG, "tools": {"approval": ["host_exec"]}, "processing": {"debounceMs": 0}}
    home = tmp_path / "home"
    clock = ManualClock()
    kwargs = {"config": config, "model": FunctionModel(model), "tools": [host_exec], "approve": approve, "clock": clock}
    first = await Klaw(home, **kwargs).start()  # type: ignore[arg-type]
    turn = asyncio.create_task(first.ask("alice", "go"))
    assert "host_exec" in await asyncio.wait_for(shown.get(), 10)
    first.engine.quit_at_once()  # the turn is cut: its message stays unanswered, for the next start
    await first.aclose()
    turn.cancel()
    await asyncio.gather(turn, return_exceptions=True)
    stopping = False
    async with Klaw(home, **kwargs) as agent:  # type: ignore[arg-type]
        assert "host_exec" in await asyncio.wait_for(shown.get(), 10)  # the resumed turn asks again
        said = await agent.ask("alice", "/approve")
        assert said.startswith("Not answered: a new question (host_exec, "), said
        assert "came since klaw restarted, before you wrote here" in said
        assert ran == []
        request_id = said.rsplit(" ", 1)[1].rstrip(".")
        assert await agent.ask("alice", f"/approve {request_id}") == "Approved: host_exec runs now."
        await asyncio.wait_for(did_run.wait(), 10)
        assert ran == ["touch PWNED"]
