"""Asks sent at once on one chat (`asyncio.gather`) are answered one turn each, in the order they were
stored, and a turn no longer sees the person's later messages above its own: the first turn's model saw
"two" and "three" (stored while it waited for the chat) before "one", and answered them all at once
(newcomer17; decision 455)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw
from tests.test_library import CONFIG


async def test_asks_sent_at_once_on_one_chat_are_answered_in_order_each_seeing_only_what_came_before(
    tmp_path: Path,
) -> None:
    seen: list[list[str]] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        seen.append([f"{m.role}:{m.content}" for m in messages if m.role != "system"])
        return f"R{len(seen)}"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model)) as agent:
        replies = await asyncio.gather(agent.ask("a", "one"), agent.ask("a", "two"), agent.ask("a", "three"))
    assert list(replies) == ["R1", "R2", "R3"]
    assert seen[0] == ["user:one"]  # before: ["user:two", "user:three", "user:one"]
    assert seen[1] == ["user:one", "assistant:R1", "user:two"]
    assert seen[2][-1] == "user:three" and "user:three" not in seen[2][:-1]
