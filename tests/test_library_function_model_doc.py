"""`help(FunctionModel)` is what a developer writing a model function reads first: it said only "See the
module docstring" (newcomer17; decision 456). It now says what the function gets and may return and
what `stream_function` is, and what it says of `messages` holds in a real library engine's turn."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


def test_the_class_docstring_says_what_the_function_gets_and_returns() -> None:
    doc = " ".join((inspect.getdoc(FunctionModel) or "").split())
    assert "See the module docstring" not in doc
    for said in ("Sequence[ChatMessage]", "AgentInfo", "ChatResponse", "tool_calls(", "stream_function", "LlmError"):
        assert said in doc, said


async def test_the_messages_are_as_the_docstring_says(tmp_path: Path) -> None:
    seen: list[Sequence[ChatMessage]] = []

    def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        seen.append(messages)
        return "ok"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(answer)) as agent:
        await agent.ask("alice", "first")
        await agent.ask("alice", "second")
    messages = seen[-1]
    assert isinstance(messages, tuple)  # "a tuple: copy it to change it"
    assert messages[0].role == "system" and (messages[-1].role, messages[-1].content) == ("user", "second")
    assert [m.content for m in messages if m.role in ("user", "assistant")][-3:] == ["first", "ok", "second"]
