"""`Klaw.ask` with text that cannot be a message: `MessageRefused` naming what is wrong, nothing stored,
and the chat goes on. The engine's `submit` is the seam every channel passes (console, socket, library):
before, a lone surrogate reached the conversation log and failed in its UTF-8 write (UnicodeEncodeError),
and a message of any size went to the model. Decision 240."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw, ManualClock, MessageRefused
from tests.test_library import CONFIG


def recording_model(asked: list[str]) -> FunctionModel:
    """A model answering "got it" that notes each message it is asked: what reached a model call."""

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        asked.append(messages[-1].content or "")
        return "got it"

    return FunctionModel(model)


async def test_text_no_log_can_hold_or_too_long_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    asked: list[str] = []
    model = recording_model(asked)
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
        with pytest.raises(MessageRefused, match=r"lone surrogate \(\\ud800 to \\udfff\).*remove it"):
            await agent.ask("ana", "cut emoji \udce5 here")
        with pytest.raises(MessageRefused, match=r"is 100,001 characters, more than the 100,000 a message may hold"):
            await agent.ask("ana", "x" * 100_001)
        with pytest.raises(MessageRefused, match="lone surrogate"):
            await agent.ask("ana", "/model \ud800")  # a slash command too: its text would be logged
        assert isinstance(MessageRefused("x"), ValueError)
        assert asked == [] and await agent.history("ana") == []  # nothing half-stored
        assert await agent.ask("ana", "x" * 100_000) == "got it"  # the limit itself is a message
        assert [entry.text[:3] for entry in await agent.history("ana")] == ["xxx", "got"]


@pytest.mark.parametrize("text", ["", "   ", "\n", " \t\r\n "])
async def test_an_empty_or_blank_message_is_refused_without_a_model_call(tmp_path: Path, text: str) -> None:
    """As `klaw chat`, the console and the web page refuse it (decision 249): before, `ask("ana", "")`
    was stored and cost a model call."""
    asked: list[str] = []
    model = recording_model(asked)
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
        with pytest.raises(MessageRefused, match=r"the message is empty \(nothing but spaces or line breaks\)"):
            await agent.ask("ana", text)
        assert asked == [] and await agent.history("ana") == [] and await agent.turns("ana") == []
        assert await agent.ask("ana", " hi ") == "got it"
