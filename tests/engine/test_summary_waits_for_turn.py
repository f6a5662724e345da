"""A chat's summary is written after its turn in flight, not in the middle of it (decision 414): the
summary's line, fsync and row take the chat's log lock, which the turn's reply needs; written mid-turn,
the person's reply waited behind that background write. A real engine, the fake OpenAI server holding
first the summary's model call, then the next turn's, and the chat's real log files."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from klaw.memory import turn_gate
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.summaries.prompts import BATCH_INSTRUCTIONS, EXCHANGE_INSTRUCTIONS
from klaw.store.records import MessageType, Role
from tests.engine.harness import running_engine
from tests.memory.summary_helpers import summarizing_reply

TEA = "how do I brew green tea at the right water temperature"
BIKE = "how do I oil a squeaking bike chain before a long ride"


def _system(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    first = messages[0] if isinstance(messages, list) and messages else {}
    return str(first.get("content") or "") if isinstance(first, dict) else ""


async def test_a_summary_answered_mid_turn_is_logged_after_that_turns_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn_gate, "WAIT_SECONDS", 60.0)  # the bound never decides here
    summary_asked, summary_go = asyncio.Event(), asyncio.Event()
    turn_asked, turn_go = asyncio.Event(), asyncio.Event()
    holding_turns = False
    async with running_engine(tmp_path, summarizer={"enabled": True}) as h:

        async def hold() -> None:
            system = _system(h.server.requests[-1].body)
            if system in (EXCHANGE_INSTRUCTIONS, BATCH_INSTRUCTIONS):
                summary_asked.set()
                await summary_go.wait()
            elif holding_turns and "The person wrote" not in system:
                turn_asked.set()
                await turn_go.wait()

        h.server.default_reply = summarizing_reply
        h.server.latency = hold
        await h.turn(TEA)
        async with asyncio.timeout(20):
            await summary_asked.wait()  # the first exchange's summary is asked for, and held
        holding_turns = True
        await h.say(BIKE)
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        async with asyncio.timeout(20):
            await turn_asked.wait()  # the second turn is at its model call
        summary_go.set()  # the summary's answer comes while the turn is in flight
        assert h.engine.summarizer is not None
        with contextlib.suppress(TimeoutError):  # the old code writes it now; the new waits for the turn
            await asyncio.wait_for(h.engine.summarizer.wait_idle(), 3)
        turn_go.set()
        await h.wait_for_replies(2)
        async with asyncio.timeout(20):
            await h.engine.summarizer.wait_idle()
        log = ConversationLog(h.home.conversations)
        records = [r for d in log.chat_dirs() for r in (await log.read(log.files(d))).records]
    kinds = [
        "summary" if r.type == MessageType.EXCHANGE_SUMMARY else "reply"
        for r in records
        if r.type == MessageType.EXCHANGE_SUMMARY or (r.role == Role.ASSISTANT and r.type == MessageType.TEXT)
    ]
    assert kinds[:3] == ["reply", "reply", "summary"], kinds
