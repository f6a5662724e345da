"""The embedding queue starts its batches between turns (decision 426): its claims, embedder calls and
vector writes share the engine's threads and the GIL with the turns a person waits for, so a message is
not embedded before its own turn, nor while it runs, and once the turn ends its message and reply go in
together. The gate counts a message from its acceptance to its turn's end (decision 497): before, it
marked only turns, and a pass could embed a message between its acceptance and its turn's start
(decision 494). A turn that stays open (a slow model, an approval) holds them back only
`QUIET_WAIT_SECONDS`: the queue then embeds anyway.

Through the library API (`Klaw`) with a model function that holds each turn open until the test lets it
answer, and the fake hashed embedder; the vectors are counted in the real SQLite store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from klaw import FunctionModel, Klaw, ManualClock
from klaw.llm.function_model import AgentInfo
from klaw.llm.messages import ChatMessage
from klaw.memory import turn_gate
from klaw.memory.turn_gate import QUIET_WAIT_SECONDS

CONFIG = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "autoRag": {"minMessageTokens": 1},
}
QUESTION = "which ferry did we book for the island trip in june?"
LATER = "and the ferry back on sunday evening?"


class _HeldTurns:
    """The model: each turn says it was asked (`asked[n]`), then holds until the test lets it answer (`go[n]`)
    with `replies[n]`."""

    def __init__(self, *replies: str) -> None:
        self.replies = replies
        self.asked = [asyncio.Event() for _ in replies]
        self.go = [asyncio.Event() for _ in replies]

    async def __call__(self, messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        turn = next(n for n, asked in enumerate(self.asked) if not asked.is_set())
        self.asked[turn].set()
        await self.go[turn].wait()
        return self.replies[turn]


@asynccontextmanager
async def _agent(home: Path, model: _HeldTurns) -> AsyncIterator[Klaw]:
    async with Klaw(home, config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        try:
            yield agent
        finally:  # a failed assertion leaves no turn holding the shutdown
            for go in model.go:
                go.set()


async def test_a_turns_message_is_embedded_after_the_turn_or_after_the_bound(tmp_path: Path) -> None:
    model = _HeldTurns("the early one, at seven")
    async with _agent(tmp_path / "home", model) as agent:
        vectors = agent.engine.store.vectors
        started = time.monotonic()
        turn = asyncio.create_task(agent.ask("alice", QUESTION))
        await asyncio.wait_for(model.asked[0].wait(), 10)

        await asyncio.sleep(QUIET_WAIT_SECONDS / 3)
        assert await vectors.count() == 0  # the turn is in flight: its message waits, since its acceptance

        while await vectors.count() == 0:  # held longer than the bound: embedded anyway
            assert time.monotonic() - started < QUIET_WAIT_SECONDS + 5, "the queue waited past its bound"
            await asyncio.sleep(0.05)
        assert not turn.done()
        assert time.monotonic() - started >= QUIET_WAIT_SECONDS * 0.9

        model.go[0].set()
        assert await turn == "the early one, at seven"
        await agent.engine.embedding_queue.wait_idle()
        assert await vectors.count() == 2  # the question and the reply


async def test_a_message_sent_while_a_turn_runs_is_not_embedded_before_its_own_turn_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first turn ends once the second message is stored; the second turn then holds at its model call.
    Before decision 497 the pass waiting since the first message ran as soon as the first turn ended: it
    embedded the second message (and the first turn's pair) beside the second turn's start."""
    monkeypatch.setattr(turn_gate, "QUIET_WAIT_SECONDS", 60.0)  # the bound never decides here
    model = _HeldTurns("the early one, at seven", "the last one, at nine")
    async with _agent(tmp_path / "home", model) as agent:
        vectors = agent.engine.store.vectors
        first = asyncio.create_task(agent.ask("alice", QUESTION))
        await asyncio.wait_for(model.asked[0].wait(), 10)
        second = asyncio.create_task(agent.ask("alice", LATER))  # accepted while the first turn runs
        await _stored(agent, LATER)
        model.go[0].set()
        assert await first == "the early one, at seven"

        await asyncio.wait_for(model.asked[1].wait(), 10)  # the second turn is under way, at its model call
        await asyncio.sleep(0.3)  # time for a pass that should not run
        assert await vectors.count() == 0  # neither the second message nor the first turn's pair

        model.go[1].set()
        assert await second == "the last one, at nine"
        async with asyncio.timeout(20):  # a hold left behind would keep the pass waiting the minute
            await agent.engine.embedding_queue.wait_idle()
        assert await vectors.count() == 4  # both questions and both replies


async def _stored(agent: Klaw, text: str) -> None:
    """Until the chat's history holds `text` (its message accepted: logged and stored)."""
    for _ in range(1000):
        if text in [entry.text for entry in await agent.history("alice")]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the message was not stored")
