"""The library API: docs/library.md's example runs as written, and `Klaw` serves turns with memory,
tools and commands through the real turn path."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import klaw
from klaw import FunctionModel, Klaw, ManualClock, TurnFailed
from klaw.llm.function_model import AgentInfo
from klaw.llm.messages import ChatMessage

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


def test_the_documented_example_runs() -> None:
    text = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    done = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "The forecast says: light rain in Oslo, 9 °C"
    assert any("model" in line.lower() for line in lines[1:])  # /status answered


def test_the_curated_names_are_exported() -> None:
    for name in klaw.__all__:
        assert getattr(klaw, name) is not None
    with pytest.raises(AttributeError):
        getattr(klaw, "Engine")  # noqa: B009 - internal, not exported


async def test_ask_remembers_within_the_chat_and_keeps_chats_apart(tmp_path: Path) -> None:
    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        said = [m.content or "" for m in messages if m.role == "user"]
        return " | ".join(said)

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        assert await agent.ask("alice", "my cat is called Miso") == "my cat is called Miso"
        assert await agent.ask("alice", "what is my cat called?") == "my cat is called Miso | what is my cat called?"
        assert await agent.ask("bob", "hello") == "hello"
        concurrent = await asyncio.gather(agent.ask("carol", "one"), agent.ask("dave", "two"))
        assert list(concurrent) == ["one", "two"]
    # Durable: a second engine on the same home has alice's conversation.
    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        assert (await agent.ask("alice", "and now?")).startswith("my cat is called Miso")


async def test_a_failed_turn_raises_with_the_error_id_and_the_next_ask_works(tmp_path: Path) -> None:
    failures = [RuntimeError("a bug in someone's model code")]

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        if failures:
            raise failures.pop()
        return "fine"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        with pytest.raises(TurnFailed, match=r"could not answer.*\(error [0-9a-f]{12}\)"):
            await agent.ask("alice", "hello")
        assert await agent.ask("alice", "again") == "fine"
