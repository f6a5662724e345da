"""The embedding gate's hold of a queued message ends on every path the message leaves by (decision 497): a
merged debounce, a turn that fails, a Ctrl-C cancel, a `/forget` while it waits, the engine's stop. A hold
left behind would make every later pass of the embedding queue wait its bound (and then embed beside the
turns): here the bound is a minute, so a hold left behind shows as vectors that do not come within 20 s,
and the gate itself says it holds nothing.

Through the library API (`Klaw`) with a model function, the fake hashed embedder and the real SQLite store;
messages sent with `engine.submit` wait in their debounce (a manual clock never ends it) until the test
lets them go, as a person's burst waits for its last message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import FunctionModel, Klaw, ManualClock, TurnFailed
from klaw.llm.function_model import AgentInfo
from klaw.llm.messages import ChatMessage
from klaw.memory import turn_gate
from klaw.memory.turn_gate import TurnGate
from klaw.store.records import ChatRef

CONFIG = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "autoRag": {"minMessageTokens": 1},
}
CHAT = ChatRef("library", "alice")
QUESTION = "which ferry did we book for the island trip in june?"
AGAIN = "and which one did we take back on sunday evening?"


@pytest.fixture(autouse=True)
def _a_minute_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turn_gate, "QUIET_WAIT_SECONDS", 60.0)  # only a released hold lets a pass go


def _gate(agent: Klaw) -> TurnGate:
    return agent.engine.processor.ingestion.turns


async def _embedded(agent: Klaw, count: int) -> None:
    """Until `count` message vectors are stored: a hold left behind keeps the pass waiting the minute."""
    async with asyncio.timeout(20):
        await agent.engine.embedding_queue.wait_idle()
    assert await agent.engine.store.vectors.count() == count


async def test_two_messages_merged_in_one_debounce_release_the_gate_with_their_turn(tmp_path: Path) -> None:
    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "the early one, at seven"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        await agent.engine.submit(CHAT, QUESTION)
        await agent.engine.submit(CHAT, AGAIN)
        assert _gate(agent).holding  # both wait in their debounce
        assert await agent.ask(CHAT, "thanks") == "the early one, at seven"  # one turn answers all three
        assert not _gate(agent).holding
        await _embedded(agent, 4)  # three messages, one reply


async def test_a_turn_that_fails_releases_the_gate(tmp_path: Path) -> None:
    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        raise RuntimeError("the model's server went away")

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        with pytest.raises(TurnFailed):
            await agent.ask(CHAT, QUESTION)
        assert not _gate(agent).holding
        await _embedded(agent, 1)  # the question; the apology is no conversation message


async def test_a_turn_cancelled_as_ctrl_c_does_and_a_message_behind_it_release_the_gate(tmp_path: Path) -> None:
    """`klaw chat`'s first Ctrl-C stops the chat's turn as the console does (`turn_stopped`, told as cancelled);
    a message sent meanwhile, out of its debounce and waiting for the chat's turn lock, is stopped with it."""
    asked = asyncio.Event()

    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        asked.set()
        await asyncio.Event().wait()  # held until cancelled
        return "never"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        turn = asyncio.create_task(agent.ask(CHAT, QUESTION))
        await asyncio.wait_for(asked.wait(), 10)
        await agent.engine.submit(CHAT, AGAIN)
        agent.engine.processor.answer_now(CHAT)  # its batch goes to wait for the running turn's lock
        await asyncio.sleep(0.05)
        async with agent.engine.processor.turn_stopped(CHAT) as stopped:
            stopped.cancelled = True
        with pytest.raises(TurnFailed, match="Ctrl-C"):
            await asyncio.wait_for(turn, 10)
        assert not _gate(agent).holding
        await _embedded(agent, 2)  # both questions, kept in the chat


async def test_forget_of_a_message_waiting_for_its_turn_releases_the_gate(tmp_path: Path) -> None:
    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "the early one, at seven"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        await agent.engine.submit(CHAT, QUESTION)  # waits in its debounce
        assert _gate(agent).holding
        assert "forgot exchange 1" in await agent.ask(CHAT, "/forget last")
        assert not _gate(agent).holding
        assert await agent.ask(CHAT, AGAIN) == "the early one, at seven"
        await _embedded(agent, 2)  # the later question and its reply; the forgotten one is gone


async def test_a_stop_cancelled_while_the_turn_finishes_releases_what_it_took_out(tmp_path: Path) -> None:
    """`turn_stopped` takes a debounced message out, then waits for the chat's lock while the cancelled turn
    finishes; cancelled there itself (a `/forget` whose caller went away), it still lets the message go."""
    asked, let_go = asyncio.Event(), asyncio.Event()

    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await let_go.wait()  # the cancelled turn holds its lock a while, as a tool being killed does
            raise
        return "never"

    async def stop() -> None:
        async with agent.engine.processor.turn_stopped(CHAT):
            pass

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock()) as agent:
        turn = asyncio.create_task(agent.ask(CHAT, QUESTION))
        await asyncio.wait_for(asked.wait(), 10)
        await agent.engine.submit(CHAT, AGAIN)  # waits in its debounce
        stopping = asyncio.create_task(stop())
        await asyncio.sleep(0.05)  # it took the message out and waits for the turn's lock
        stopping.cancel()
        let_go.set()
        await asyncio.gather(stopping, return_exceptions=True)
        for _ in range(1000):  # the cancelled turn ends
            if not agent.engine.processor.turns_under_way:
                break
            await asyncio.sleep(0.01)
        assert not _gate(agent).holding
        await _embedded(agent, 2)  # both questions
        turn.cancel()


async def test_the_engines_stop_answers_a_queued_message_and_leaves_the_gate_released(tmp_path: Path) -> None:
    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "the early one, at seven"

    agent = Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(model), clock=ManualClock())
    async with agent:
        gate = _gate(agent)
        await agent.engine.submit(CHAT, QUESTION)  # waits in its debounce when the stop begins
        assert gate.holding
    assert not gate.holding  # its turn in the drain released it (and what a cut drain leaves, `abandon`)
    async with agent:
        assert [entry.text for entry in await agent.history(CHAT)][-2:] == [QUESTION, "the early one, at seven"]
        await _embedded(agent, 2)  # its jobs, left by the stop, embedded by the next start
