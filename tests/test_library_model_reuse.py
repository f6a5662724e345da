"""A program's `model=` is its own, as a pydantic-ai model is shared by its agents: closing one `Klaw` leaves
it open, and the same `FunctionModel` answers for the next `Klaw`, on another home or the same one, and for
two at once (decision 365). Before, the first agent's close closed it, and the second's every `ask` failed as
an opaque `TurnFailed` ("something went wrong", the cause "model 'function:answer' was used after aclose()")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw
from tests.test_library import CONFIG


def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return f"answer {info.round}: {messages[-1].content}"


async def test_one_model_answers_for_a_klaw_after_another_closed_and_for_two_at_once(tmp_path: Path) -> None:
    model = FunctionModel(answer)
    async with Klaw(tmp_path / "first", config=CONFIG, model=model) as agent:
        assert await agent.ask("alice", "hello") == "answer 1: hello"
    assert not model.closed  # the program's to close

    async with Klaw(tmp_path / "second", config=CONFIG, model=model) as agent:
        assert await agent.ask("alice", "hello again") == "answer 2: hello again"
    async with Klaw(tmp_path / "first", config=CONFIG, model=model) as agent:  # the first home, reopened
        assert await agent.ask("alice", "back") == "answer 3: back"
        assert [entry.text for entry in await agent.history("alice")][-1] == "answer 3: back"

    async with (
        Klaw(tmp_path / "third", config=CONFIG, model=model) as one,
        Klaw(tmp_path / "fourth", config=CONFIG, model=model) as other,
    ):
        replies = await asyncio.gather(one.ask("bob", "one"), other.ask("bob", "other"))
    assert sorted(reply.split(": ")[1] for reply in replies) == ["one", "other"]
    assert sorted(reply.split(": ")[0] for reply in replies) == ["answer 4", "answer 5"]
    assert len(model.calls) == 5
