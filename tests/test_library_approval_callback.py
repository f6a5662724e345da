"""A program's `approve=` callback, or its absence, never leaves a held call waiting nor told as the person's
denial (decision 538, newcomer24 items 2 and 10): a callback that raised made the `ask` wait the whole approval
timeout ("Task exception was never retrieved … ValueError"), and without a callback the model read "the person
denied" a call nobody was asked about. Driven through the fake OpenAI server, as a program's engine talks to
its model, with a real home; the clock is a `ManualClock`, so the approval timeout never passes by itself."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from klaw import ChatRef, Klaw, ManualClock
from klaw.llm.fake_server import FakeOpenAiServer

ran: list[str] = []


def danger() -> str:
    """Something the person must approve first."""
    ran.append("danger")
    return "ran!"


def config(server: FakeOpenAiServer) -> dict[str, Any]:
    return {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "models": {"stand-in/echo": {"baseUrl": server.base_url}},
        "routing": {"default": "stand-in/echo"},
        "tools": {"enabled": ["clock"], "approval": ["danger"]},
    }


async def tool_result(home: Path, approve: Any) -> str:
    """What the model read as the result of a held call of `danger`, asked with `approve` as the callback."""
    async with FakeOpenAiServer() as server:
        server.reply_tool_calls([("danger", {})])
        server.reply_text("done")
        clock = ManualClock()
        async with Klaw(home, config=config(server), tools=[danger], approve=approve, clock=clock) as agent:
            assert await asyncio.wait_for(agent.ask("alice", "do the dangerous thing"), 30) == "done"
        results: list[str] = [m["content"] for m in server.chat_requests[1].body["messages"] if m["role"] == "tool"]
        return results[-1]


async def test_a_callback_that_raises_ends_the_question_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def approve(chat: ChatRef, question: str) -> bool:
        raise ValueError("my approve callback is buggy")

    ran.clear()
    with caplog.at_level(logging.WARNING, logger="klaw.library"):
        result = await tool_result(tmp_path / "home", approve)
    assert ran == []
    assert result.startswith("Not run: danger was not approved: the approval callback raised ValueError"), result
    assert "denied" not in result, result
    [said] = [r.getMessage() for r in caplog.records if "approve callback" in r.getMessage()]
    assert "raised ValueError (at " in said and "in approve)" in said and "library:alice" in said, said
    assert "buggy" not in said  # its message may quote the question: not logged


async def test_without_a_callback_the_model_reads_that_nobody_was_asked(tmp_path: Path) -> None:
    ran.clear()
    result = await tool_result(tmp_path / "home", None)
    assert ran == []
    # the words a piped `klaw chat` gives the model (approval_outcome.nobody_asked), not "the person denied"
    assert result.startswith("Not run: danger needs the person's approval, and nobody was asked: "), result
    assert "approve=" in result and "tools.approval" in result and "denied" not in result, result


async def test_a_callback_answering_neither_true_nor_false_runs_nothing(tmp_path: Path) -> None:
    async def approve(chat: ChatRef, question: str) -> Any:
        return "no"  # truthy: it ran the tool before

    ran.clear()
    result = await tool_result(tmp_path / "home", approve)
    assert ran == []
    assert "the approval callback returned str, not True or False" in result, result


async def test_a_callback_answering_true_or_false_is_obeyed(tmp_path: Path) -> None:
    async def yes(chat: ChatRef, question: str) -> bool:
        return True

    async def no(chat: ChatRef, question: str) -> bool:
        return False

    ran.clear()
    assert await tool_result(tmp_path / "home", yes) == "ran!"
    assert ran == ["danger"]
    result = await tool_result(tmp_path / "home", no)
    assert result == "Not run: the person denied danger. Do not retry it unless they ask you to."
    assert ran == ["danger"]
