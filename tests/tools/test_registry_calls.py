"""The tool registry's calls: arguments validated, failures, timeouts and odd results given back as results,
never exceptions; a model response's calls run concurrently (schemas: test_registry.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path

import pytest

from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext
from tests.tools.registry_samples import (
    boom,
    call,
    context_for,
    echo,
    plan_trip,
    structured,
    unserialisable,
    whoami,
)


@pytest.fixture
def context(tmp_path: Path) -> ToolContext:
    return context_for(tmp_path)


# --- execution: results and errors ---------------------------------------------------------------


async def test_validated_arguments_reach_the_tool(context: ToolContext) -> None:
    registry = ToolRegistry()
    registry.register(plan_trip)
    arguments = {"destination": {"city": "Rome"}, "days": "3", "travellers": ["ann", "bo"], "mode": "car"}
    result = await registry.execute(call("plan_trip", arguments), context)
    assert result == ToolResult("c1", "plan_trip", "Rome/3/ann,bo/car/None", is_error=False)


async def test_unknown_tool_lists_the_available_ones(context: ToolContext) -> None:
    registry = ToolRegistry()
    registry.register(echo)
    registry.register(whoami)
    result = await registry.execute(call("nope", {}), context)
    assert result.is_error
    assert result.name == "nope"
    assert "unknown tool 'nope'" in result.content
    assert "echo, whoami" in result.content


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("{not json", "not valid JSON"), ('["a"]', "must be a JSON object, not an array"), ('"x"', "not a string")],
)
async def test_bad_json_arguments_are_an_error_result(context: ToolContext, raw: str, expected: str) -> None:
    registry = ToolRegistry()
    registry.register(echo)
    result = await registry.execute(call("echo", raw), context)
    assert result.is_error
    assert expected in result.content


async def test_empty_arguments_mean_no_arguments(context: ToolContext) -> None:
    registry = ToolRegistry()
    registry.register(whoami)
    result = await registry.execute(call("whoami", ""), context)
    assert result.content == "console:alice"


async def test_validation_errors_name_each_field_without_echoing_values(context: ToolContext) -> None:
    registry = ToolRegistry()
    registry.register(plan_trip)
    huge = "Q" * 5000
    arguments = {"destination": {"country": "IT"}, "days": huge, "mode": "plane", "extra": 1}
    result = await registry.execute(call("plan_trip", arguments), context)
    assert result.is_error
    lines = result.content.splitlines()
    assert lines[0] == "invalid arguments:"
    assert "- destination.city: Field required" in lines
    assert "- days: Input should be a valid integer, unable to parse string as an integer" in lines
    assert "- travellers: Field required" in lines
    assert "- mode: Input should be 'train' or 'car'" in lines
    assert "- extra: Extra inputs are not permitted" in lines
    assert "QQQ" not in result.content


async def test_a_raising_tool_becomes_an_error_result_and_is_logged_without_arguments(
    context: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ToolRegistry()
    registry.register(boom)
    with caplog.at_level(logging.WARNING, logger="klaw.tools.calls"):
        result = await registry.execute(call("boom", {"text": "secret-diary-entry"}), context)
    assert result == ToolResult("c1", "boom", "ValueError: cannot handle secret-diary-entry", is_error=True)
    assert "Traceback" not in result.content
    logged = caplog.text
    assert "boom" in logged
    assert "ValueError" in logged
    assert "secret-diary-entry" not in logged
    # One line saying where (klaw chat prints warnings into the person's terminal), frames only at DEBUG.
    (warning,) = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert "\n" not in warning.getMessage()
    assert "registry_samples.py:" in warning.getMessage()


async def test_a_tool_exceeding_the_timeout_is_cancelled(context: ToolContext) -> None:
    never = asyncio.Event()
    cancelled = asyncio.Event()

    async def hang() -> str:
        """Waits forever."""
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    registry = ToolRegistry(timeout_seconds=0.01)
    registry.register(hang)
    result = await registry.execute(call("hang"), context)
    assert result.is_error
    assert "did not finish within 0.01 seconds" in result.content
    assert cancelled.is_set()


async def test_a_plain_def_past_the_timeout_is_said_to_be_waited_for_no_longer_not_cancelled(
    context: ToolContext,
) -> None:
    """A thread cannot be stopped: "and was cancelled" told the model (and the person) the action was undone
    while it went on (newcomer21, decision 501)."""
    gate, finished = threading.Event(), threading.Event()

    def slow_upload(name: str) -> str:
        """Uploads a file, blocking.

        Args:
            name: the file
        """
        gate.wait(10)
        finished.set()
        return "uploaded"

    registry = ToolRegistry(timeout_seconds=0.05)
    registry.register(slow_upload)
    result = await registry.execute(call("slow_upload", {"name": "a.txt"}), context)
    assert result.is_error
    assert result.content == (
        "the tool did not finish within 0.05 seconds: klaw stopped waiting for it, and it may still be running"
        " (what it does may still happen)"
    )
    assert "cancelled" not in result.content
    gate.set()  # and so it does: the thread went on
    assert await asyncio.to_thread(finished.wait, 10)


async def test_a_tool_raising_timeout_itself_is_not_reported_as_our_timeout(context: ToolContext) -> None:
    async def upstream_timeout() -> str:
        """Its own call timed out."""
        raise TimeoutError("upstream took too long")

    registry = ToolRegistry()
    registry.register(upstream_timeout)
    result = await registry.execute(call("upstream_timeout"), context)
    assert result.is_error
    assert result.content == "TimeoutError: upstream took too long"


async def test_non_string_results_are_json(context: ToolContext) -> None:
    registry = ToolRegistry()
    registry.register(structured)
    registry.register(unserialisable)
    result = await registry.execute(call("structured"), context)
    assert not result.is_error
    assert json.loads(result.content) == {"answer": 42, "place": {"city": "Köln", "country": "DE"}, "tags": ["a", "b"]}
    bad = await registry.execute(call("unserialisable"), context)
    assert bad.is_error
    assert "object" in bad.content


async def test_long_results_are_truncated_with_a_note(context: ToolContext) -> None:
    registry = ToolRegistry(max_result_chars=100)
    registry.register(echo)
    result = await registry.execute(call("echo", {"text": "x" * 250}), context)
    assert not result.is_error
    assert result.content.startswith("x" * 100 + "\n")
    assert "x" * 101 not in result.content
    assert "150 of 250 characters cut" in result.content
    short = await registry.execute(call("echo", {"text": "x" * 100}), context)
    assert short.content == "x" * 100


# --- execute_all ---------------------------------------------------------------------------------


async def test_execute_all_runs_calls_concurrently_and_keeps_their_order(context: ToolContext) -> None:
    ping_started, pong_started = asyncio.Event(), asyncio.Event()

    async def ping() -> str:
        """Needs pong to be running."""
        ping_started.set()
        await pong_started.wait()
        return "ping done"

    async def pong() -> str:
        """Needs ping to be running."""
        pong_started.set()
        await ping_started.wait()
        return "pong done"

    # Run one after the other, each would wait for the other forever and hit the (bounded) timeout.
    registry = ToolRegistry(timeout_seconds=5)
    registry.register(ping)
    registry.register(pong)
    registry.register(echo)
    calls = [call("pong", call_id="1"), call("nope", call_id="2"), call("ping", call_id="3"), call("echo", {}, "4")]
    results = await registry.execute_all(calls, context)
    assert [r.call_id for r in results] == ["1", "2", "3", "4"]
    assert [(r.content, r.is_error) for r in results[::2]] == [("pong done", False), ("ping done", False)]
    assert results[1].is_error
    assert results[3].is_error
    assert "- text: Field required" in results[3].content


async def test_execute_all_with_no_calls() -> None:
    assert await ToolRegistry().execute_all([], context_for(Path())) == []
