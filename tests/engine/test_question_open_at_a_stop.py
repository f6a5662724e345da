"""An approval question still waiting when klaw stops (Ctrl-C, `systemctl stop`, `Klaw.aclose`) is asked again
after the restart (newcomer22, decision 513): the stop cuts the turn waiting for it, as a kill or the drain's
deadline does, so its message is answered again at the next start; the question stays noted in
approvals-open.json, the model reads the call never ran, and asks for it again, which asks the person again.
It used to be denied at the stop ("Not run: current_time needs approval and the engine is stopping") with the
message answered, and never asked again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, AgentMessage, ChatMessage, ChatRef, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls
from tests.test_library import CONFIG

APPROVAL = {**CONFIG, "tools": {"approval": ["current_time_here"]}, "processing": {"debounceMs": 0}}
ran: list[str] = []


async def current_time_here() -> str:
    """The time here."""
    ran.append("ran")
    return "09:41"


def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    last = messages[-1]
    if last.role == "tool" and "09:41" in str(last.content):
        return "It is 09:41."
    return tool_calls(call_tool("current_time_here", {}))  # asked for, and asked for again once told it never ran


async def test_a_question_open_at_a_stop_is_asked_again_after_the_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    asked: list[str] = []
    first_asked = asyncio.Event()

    async def never_answered(chat: ChatRef, question: str) -> bool:
        asked.append(question)
        first_asked.set()
        await asyncio.Event().wait()  # the person is away when klaw stops
        return False

    agent = Klaw(home, config=APPROVAL, model=FunctionModel(model), tools=[current_time_here], approve=never_answered)
    await agent.start()
    waiting = asyncio.create_task(agent.ask("alice", "what time is it?"))
    async with asyncio.timeout(30):
        await first_asked.wait()
    await agent.aclose()  # a graceful stop with the question open
    await asyncio.gather(waiting, return_exceptions=True)
    assert ran == [] and "current_time_here" in asked[0]
    noted = json.loads((home / "approvals-open.json").read_text(encoding="utf-8"))
    assert noted, "the open question is noted across the stop"

    again: list[str] = []
    replies: list[AgentMessage] = []
    answered = asyncio.Event()

    async def approves(chat: ChatRef, question: str) -> bool:
        again.append(question)
        return True

    async def on_message(message: AgentMessage) -> None:
        replies.append(message)
        answered.set()

    model_again = FunctionModel(model)
    restarted = Klaw(
        home, config=APPROVAL, model=model_again, tools=[current_time_here], approve=approves, on_message=on_message
    )
    async with restarted:
        async with asyncio.timeout(30):
            await answered.wait()  # the message answered again at the start, without the person writing
        history = await restarted.history("alice")
    assert again and "current_time_here" in again[0], again  # asked again
    assert ran == ["ran"] and replies[-1].text == "It is 09:41.", replies
    said = " ".join(entry.text for entry in history)
    assert "the engine is stopping" not in said, said
