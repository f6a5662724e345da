"""A failed `ask` tells the program why: `TurnFailed` carries the turn's `error_id` and the exception that
ended it (`cause`, also `__cause__`), so a program can tell a server that is down (retry later) from a
mistake to fix; and a `FunctionModel` function that returns what no model could is named, with what it may
return. Before, `TurnFailed` had neither attribute, and a function returning 42 failed with "something went
wrong" over an AttributeError deep in function_model.py. Decision 293."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import (
    AgentInfo,
    ChatMessage,
    FunctionModel,
    Klaw,
    LlmConnectionError,
    LlmError,
    LlmMalformedResponseError,
    ManualClock,
    TurnFailed,
)
from klaw.llm.answer_cap import MAX_ANSWER_CHARS
from tests.test_library import CONFIG


async def test_a_model_function_returning_a_number_is_named_with_what_it_may_return(tmp_path: Path) -> None:
    def answer_number(messages: Sequence[ChatMessage], info: AgentInfo) -> int:
        return 42

    model = FunctionModel(answer_number)  # type: ignore[arg-type]
    async with Klaw(tmp_path / "home", config=CONFIG, model=model, clock=ManualClock()) as agent:
        with pytest.raises(TurnFailed) as failed:
            await agent.ask("ana", "hi")
    message = str(failed.value)
    assert re.fullmatch(
        r"Sorry, I could not answer: the model function answer_number\(\) returned int; it must return a str"
        r" \(the reply's text\) or a ChatResponse \(tool_calls\(\.\.\.\)\) \(model 'function:answer_number'\)\."
        r" \(error (\w+)\)",
        message,
    ), message
    assert failed.value.error_id is not None and f"(error {failed.value.error_id})" in message
    assert isinstance(failed.value.cause, LlmMalformedResponseError)
    assert failed.value.__cause__ is failed.value.cause


async def test_a_failed_turn_carries_the_model_error_so_a_program_can_retry(tmp_path: Path) -> None:
    calls: list[int] = []

    def flaky(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise LlmConnectionError("the model server cannot be reached", model_id="local/x", base_url=None)
        return "back again"

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(flaky), clock=ManualClock()) as agent:
        with pytest.raises(TurnFailed) as failed:
            await agent.ask("ana", "hi")
        assert isinstance(failed.value.cause, LlmError) and isinstance(failed.value.__cause__, LlmConnectionError)
        assert await agent.ask("ana", "hi again") == "back again"  # what the program does on a server down


async def test_a_bug_in_the_program_s_function_is_the_cause_too(tmp_path: Path) -> None:
    def buggy(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        settings: dict[str, str] = {}
        return settings["missing"]

    async with Klaw(tmp_path / "home", config=CONFIG, model=FunctionModel(buggy), clock=ManualClock()) as agent:
        with pytest.raises(TurnFailed, match=r"something went wrong .*\(error \w+\)") as failed:
            await agent.ask("ana", "hi")
    assert isinstance(failed.value.cause, KeyError) and failed.value.__cause__ is failed.value.cause


async def test_an_answer_of_the_programs_own_model_past_the_cap_fails_its_turn_and_is_stored_nowhere(
    tmp_path: Path,
) -> None:
    """The 2,000,000-character cap held only for a server's answers (openai_client): a FunctionModel's 40 MiB
    reply was stored in a log line no reader takes, and `klaw memory forget` could not erase it (decision 465).
    Now any model's answer past the cap fails its turn in the same words, whole or streamed."""

    def endless(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "ok" if messages[-1].content == "short" else "B" * (MAX_ANSWER_CHARS + 1)

    model = FunctionModel(endless, chunk_chars=100_000)  # streamed in 21 pieces, not 500,001
    async with Klaw(tmp_path / "home", config=CONFIG, model=model) as agent:
        with pytest.raises(TurnFailed) as whole:
            await agent.ask("ana", "write forever")
        stream = agent.stream("ana", "write forever, streamed")
        with pytest.raises(TurnFailed) as streamed:
            async for _ in stream:
                pass
        assert await agent.ask("ana", "short") == "ok"
        history = await agent.history("ana")
    for failed in (whole.value, streamed.value):
        assert isinstance(failed.cause, LlmMalformedResponseError)
        assert f"passed {MAX_ANSWER_CHARS:,} characters without ending" in str(failed), str(failed)
        assert "(model 'function:endless')" in str(failed) and "shorter answer" in str(failed)
    assert not any("BBBB" in entry.text for entry in history)
    logs = (tmp_path / "home" / "conversations").rglob("*.jsonl")
    assert not any(b"BBBB" in path.read_bytes() for path in logs)


async def test_a_summary_past_the_cap_is_not_stored_and_the_exchange_is_asked_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The summarizer's model call is not a turn's (decision 469): a FunctionModel answering a summary request
    with 2,000,001 characters had its first 1,000 stored as the exchange's summary. Now the request fails in the
    cap's words, nothing is stored, the log names the error's class only, and the exchange is asked again."""
    summary_requests: list[int] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        if info.purpose != "summary":
            return "twelve apples"
        summary_requests.append(1)
        return "S" * (MAX_ANSWER_CHARS + 1) if len(summary_requests) == 1 else "1. the person asked about apples"

    clock = ManualClock()
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"batchExchanges": 1}}
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(model), clock=clock) as agent:
        assert await agent.ask("ana", "how many apples?") == "twelve apples"
        summarizer = agent.engine.summarizer
        assert summarizer is not None
        async with asyncio.timeout(30):
            first = await summarizer.exchanges.wait_until(lambda s: s.failed > 0 or s.completed > 0)
            assert (await summarizer.status()).counts.exchanges == 0
            await clock.wait_for_sleeper(1.0)  # the worker's backoff after its first failure
            await clock.advance(1.0)
            second = await summarizer.exchanges.wait_until(lambda s: s.completed > 0)
            counts = (await summarizer.status()).counts
    assert (first.completed, first.failed) == (0, 1)
    assert f"passed {MAX_ANSWER_CHARS:,} characters without ending" in (first.last_error or ""), first.last_error
    assert (second.completed, second.given_up, counts.exchanges) == (1, 0, 1)
    logs = b"".join(path.read_bytes() for path in (tmp_path / "home" / "conversations").rglob("*.jsonl"))
    assert b"the person asked about apples" in logs and b"SSSS" not in logs
    assert "SSSS" not in caplog.text
