"""The embedding queue starts its batches between turns (decision 426): its claims, embedder calls and
vector writes share the engine's threads and the GIL with the turns a person waits for, so while a turn
is in flight the message that started it is not embedded yet, and once the turn ends its message and
reply go in together. A turn that stays open (a slow model, an approval) holds them back only
`QUIET_WAIT_SECONDS`: the queue then embeds anyway.

Through the library API (`Klaw`) with a model function that holds the turn open until the test lets
it answer, and the fake hashed embedder; the vectors are counted in the real SQLite store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from klaw import FunctionModel, Klaw, ManualClock
from klaw.llm.function_model import AgentInfo
from klaw.llm.messages import ChatMessage
from klaw.memory.turn_gate import QUIET_WAIT_SECONDS

CONFIG = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "autoRag": {"minMessageTokens": 1},
}
QUESTION = "which ferry did we book for the island trip in june?"


async def test_a_message_sent_during_a_turn_is_embedded_after_it_or_after_the_bound(tmp_path: Path) -> None:
    """The gate holds a pass while a turn is in flight. The turn's own question may be embedded before its
    turn starts (a pass can run between the message's acceptance and its turn taking the gate: the gate marks
    turns, not queued messages), so the message held back is one sent while the turn runs."""
    answer = asyncio.Event()
    asked = asyncio.Event()

    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        asked.set()
        await answer.wait()
        return "the early one, at seven"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        vectors = agent.engine.store.vectors
        turn = asyncio.create_task(agent.ask("alice", QUESTION))
        await asyncio.wait_for(asked.wait(), 10)
        before = await vectors.count()  # 0 or 1: the question, if a pass ran before its turn began
        later = asyncio.create_task(agent.ask("alice", "and the ferry back?"))  # accepted mid-turn
        started = time.monotonic()

        await asyncio.sleep(QUIET_WAIT_SECONDS / 3)
        assert await vectors.count() == before  # the turn is in flight: the new message waits

        while await vectors.count() == before:  # held longer than the bound: embedded anyway
            assert time.monotonic() - started < QUIET_WAIT_SECONDS + 5, "the queue waited past its bound"
            await asyncio.sleep(0.05)
        assert not turn.done()
        assert time.monotonic() - started >= QUIET_WAIT_SECONDS * 0.9

        answer.set()
        assert await turn == "the early one, at seven"
        assert await later == "the early one, at seven"
        await agent.engine.embedding_queue.wait_idle()
        assert await vectors.count() == 4  # both questions and both replies
