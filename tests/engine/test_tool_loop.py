"""The tool-call loop on its own, with an in-process `FunctionModel` and a real `ToolRegistry`.

The end-to-end turns (test_engine_turns.py) drive it through the engine and the fake HTTP server;
these check its rules one by one, fast: rounds are bounded, a tool's failure is a result the model
reads, calls of one round run together, every step is recorded as it happens, streaming passes the
text on without changing the outcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from klaw.engine.tool_loop import LoopOutcome, run_tool_loop, tool_limit_message
from klaw.engine.tools_used import NOT_OFFERED
from klaw.llm.errors import LlmServerError
from klaw.llm.function_model import AgentInfo, FunctionModel, ModelFunction, call_tool, tool_calls
from klaw.llm.messages import ChatMessage, ChatResponse
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

CHAT = ChatRef("console", "me")
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _registry() -> ToolRegistry:
    registry = ToolRegistry(timeout_seconds=5)

    @registry.tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @registry.tool
    async def weather(city: str) -> str:
        """The weather in a city."""
        raise ValueError(f"no weather station in {city}")

    return registry


async def _loop(
    function: ModelFunction,
    tmp_path: Path,
    *,
    registry: ToolRegistry | None = None,
    max_rounds: int = 5,
    streamed: list[str] | None = None,
) -> tuple[LoopOutcome, FunctionModel, list[ChatMessage], list[MessageRecord]]:
    model = FunctionModel(function, chunk_chars=2)
    registry = registry or _registry()
    messages = [ChatMessage.system("be brief"), ChatMessage.user("what is 2 + 3?")]
    recorded: list[MessageRecord] = []

    async def record(records: Sequence[MessageRecord]) -> None:
        recorded.extend(records)

    async def on_text(piece: str) -> None:
        assert streamed is not None
        streamed.append(piece)

    outcome = await run_tool_loop(
        model=model,
        messages=messages,
        tools=registry.specs(),
        registry=registry,
        tool_context=ToolContext(CHAT, tmp_path),
        max_rounds=max_rounds,
        chat=CHAT,
        record=record,
        now=lambda: NOW,
        on_text=None if streamed is None else on_text,
    )
    return outcome, model, messages, recorded


def add_then_answer(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
    if messages[-1].role == "tool":
        return f"2 + 3 = {messages[-1].content}"
    return tool_calls(call_tool("add", {"a": 2, "b": 3}))


async def test_a_tool_call_runs_and_its_result_reaches_the_model(tmp_path: Path) -> None:
    outcome, model, messages, recorded = await _loop(add_then_answer, tmp_path)

    assert outcome == LoopOutcome("2 + 3 = 5", ExchangeStatus.COMPLETED, rounds=2, tool_calls=1, tool_names=("add",))
    assert model.calls[0].info.tool_names == ("add", "weather")
    assert [(m.role, m.content) for m in messages[2:]] == [("assistant", None), ("tool", "5")]
    assert messages[2].tool_calls == (call_tool("add", {"a": 2, "b": 3}),)
    assert [(r.role, r.type, r.content) for r in recorded] == [
        (Role.ASSISTANT, MessageType.TOOL_CALL, ""),
        (Role.TOOL, MessageType.TOOL_RESULT, "5"),
    ]
    assert recorded[1].metadata == {"tool_call_id": "call_add", "name": "add", "is_error": False}
    assert all(r.chat == CHAT and r.created_at == NOW for r in recorded)


async def test_an_answer_without_tool_calls_ends_the_loop_in_one_round(tmp_path: Path) -> None:
    outcome, model, messages, recorded = await _loop(lambda messages, info: "5", tmp_path)
    assert outcome == LoopOutcome("5", ExchangeStatus.COMPLETED, rounds=1, tool_calls=0)
    assert (len(model.calls), len(messages), recorded) == (1, 2, [])


async def test_rounds_are_bounded_and_the_person_is_told_why(tmp_path: Path) -> None:
    def forever(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse:
        return tool_calls(call_tool("add", {"a": info.round, "b": 1}, id=f"c{info.round}"))

    outcome, model, messages, recorded = await _loop(forever, tmp_path, max_rounds=3)

    assert outcome == LoopOutcome(
        tool_limit_message(3), ExchangeStatus.TOOL_LIMIT, rounds=3, tool_calls=3, tool_names=("add",) * 3
    )
    assert "processing.maxToolCallRounds = 3" in outcome.text
    assert len(model.calls) == 3  # the limit counts model calls: no fourth one
    assert [r.type for r in recorded] == [MessageType.TOOL_CALL, MessageType.TOOL_RESULT] * 3
    assert [m.content for m in messages if m.role == "tool"] == ["2", "3", "4"]


async def test_tool_failures_are_results_the_model_reads(tmp_path: Path) -> None:
    def bad_calls(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if info.round == 2:
            return "sorry, no luck"
        return tool_calls(
            call_tool("weather", {"city": "Atlantis"}, id="raises"),
            call_tool("add", '{"a": 2, "b":', id="bad_json"),
            call_tool("add", {"a": "two", "b": 3}, id="bad_type"),
            call_tool("teleport", {}, id="unknown"),
        )

    outcome, model, _, recorded = await _loop(bad_calls, tmp_path)

    names = ("weather", "add", "add", "teleport")
    not_run = ((3, NOT_OFFERED),)  # the reply's list marks it
    assert outcome == LoopOutcome("sorry, no luck", ExchangeStatus.COMPLETED, 2, 4, names, not_run)
    seen = {m.tool_call_id: m.content or "" for m in model.calls[1].messages if m.role == "tool"}
    assert "no weather station in Atlantis" in seen["raises"]
    assert "not valid JSON" in seen["bad_json"]
    assert "a" in seen["bad_type"] and "integer" in seen["bad_type"]
    assert "unknown tool 'teleport'" in seen["unknown"] and "add, weather" in seen["unknown"]
    results = [r for r in recorded if r.type is MessageType.TOOL_RESULT]
    assert [(r.metadata or {})["is_error"] for r in results] == [True, True, True, True]


async def test_the_calls_of_one_round_run_at_the_same_time(tmp_path: Path) -> None:
    registry = ToolRegistry(timeout_seconds=30)  # one call at a time: each ends "timed out", never "met"
    both_started = asyncio.Barrier(2)

    @registry.tool
    async def meet(name: str) -> str:
        """Wait until the other call has started too."""
        await both_started.wait()  # one call at a time would wait here until the registry's timeout
        return f"{name} met"

    def two_calls(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if info.round == 2:
            return " and ".join(m.content or "" for m in messages if m.role == "tool")
        return tool_calls(call_tool("meet", {"name": "a"}, id="a"), call_tool("meet", {"name": "b"}, id="b"))

    async with asyncio.timeout(120):  # a safety net only: the calls' answers tell
        outcome, _, _, _ = await _loop(two_calls, tmp_path, registry=registry)
    assert outcome.text == "a met and b met"  # results in the calls' order


async def test_streaming_passes_the_text_on_and_changes_nothing_else(tmp_path: Path) -> None:
    pieces: list[str] = []
    streamed, model, messages, recorded = await _loop(add_then_answer, tmp_path, streamed=pieces)
    whole, _, whole_messages, whole_recorded = await _loop(add_then_answer, tmp_path)

    # the first piece goes at once; later ones may be gathered while the channel takes the last (decision 443)
    assert pieces[0] == "2 " and len(pieces) <= 5
    assert "".join(pieces) == streamed.text == "2 + 3 = 5"
    assert streamed == whole
    assert messages == whole_messages  # the tool call's arguments, streamed in pieces, arrive whole
    assert [(r.type, r.content, r.metadata) for r in recorded] == [
        (r.type, r.content, r.metadata) for r in whole_recorded
    ]
    assert all(call.info.streamed for call in model.calls)


async def test_text_beside_tool_calls_is_streamed_and_recorded(tmp_path: Path) -> None:
    def think_aloud(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if info.round == 1:
            return tool_calls(call_tool("add", {"a": 2, "b": 3}), content="Adding.")
        return "5"

    pieces: list[str] = []
    outcome, _, _, recorded = await _loop(think_aloud, tmp_path, streamed=pieces)
    assert "".join(pieces) == "Adding.5"
    assert outcome.text == "5"
    assert (recorded[0].type, recorded[0].content) == (MessageType.TOOL_CALL, "Adding.")
    assert json.loads((recorded[0].metadata or {})["tool_calls"][0]["arguments"]) == {"a": 2, "b": 3}


async def test_a_model_error_ends_the_loop_with_what_was_done_recorded(tmp_path: Path) -> None:
    def fails_second(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse:
        if info.round == 2:
            raise LlmServerError("the server is down", model_id="fn", base_url=None)
        return tool_calls(call_tool("add", {"a": 2, "b": 3}))

    recorded: list[MessageRecord] = []

    async def record(records: Sequence[MessageRecord]) -> None:
        recorded.extend(records)

    with pytest.raises(LlmServerError):
        await run_tool_loop(
            model=FunctionModel(fails_second),
            messages=[ChatMessage.user("2 + 3?")],
            tools=_registry().specs(),
            registry=_registry(),
            tool_context=ToolContext(CHAT, tmp_path),
            max_rounds=5,
            chat=CHAT,
            record=record,
            now=lambda: NOW,
        )
    assert [r.type for r in recorded] == [MessageType.TOOL_CALL, MessageType.TOOL_RESULT]
