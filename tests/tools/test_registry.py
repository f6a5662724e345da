"""The tool registry: schemas derived from signatures, and calls that fail as results, never exceptions."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext, ToolDefinitionError


class Place(BaseModel):
    city: str
    country: str = "DE"


async def plan_trip(
    destination: Place,
    days: Annotated[int, Field(ge=1, le=30, description="How many days to stay.")],
    travellers: list[str],
    mode: Literal["train", "car"] = "train",
    note: str | None = None,
) -> str:
    """Plan a trip.

    Keeps it cheap.

    Args:
        destination: Where to go.
        days: Ignored, the Annotated description wins.
        travellers: Names of everyone
            who comes along.

    Returns:
        A plan.
    """
    return f"{destination.city}/{days}/{','.join(travellers)}/{mode}/{note}"


async def whoami(context: ToolContext, shout: bool = False) -> str:
    """Say which chat is calling."""
    text = str(context.chat)
    return text.upper() if shout else text


async def echo(text: str) -> str:
    """Echo the text."""
    return text


async def boom(text: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {text}")


async def structured() -> dict[str, Any]:
    """Return a dict."""
    return {"answer": 42, "place": Place(city="Köln"), "tags": ["a", "b"]}


async def unserialisable() -> object:
    """Return something that is not JSON."""
    return object()


def context_for(tmp_path: Path) -> ToolContext:
    return ToolContext(chat=ChatRef("console", "alice"), workspace=tmp_path)


def call(name: str, arguments: Any = None, call_id: str = "c1") -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
    return ToolCall(id=call_id, name=name, arguments=raw)


@pytest.fixture
def context(tmp_path: Path) -> ToolContext:
    return context_for(tmp_path)


# --- schema derivation ---------------------------------------------------------------------------


async def test_schema_is_derived_from_the_signature() -> None:
    registry = ToolRegistry()
    registry.register(plan_trip)
    (spec,) = registry.specs()
    assert spec.name == "plan_trip"
    assert spec.description == "Plan a trip.\n\nKeeps it cheap."
    schema = dict(spec.parameters)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["destination", "days", "travellers"]
    props = schema["properties"]
    assert list(props) == ["destination", "days", "travellers", "mode", "note"]
    assert props["destination"]["description"] == "Where to go."
    assert props["days"] == {"type": "integer", "minimum": 1, "maximum": 30, "description": "How many days to stay."}
    assert props["travellers"]["type"] == "array"
    assert props["travellers"]["items"] == {"type": "string"}
    assert props["travellers"]["description"] == "Names of everyone who comes along."
    assert props["mode"]["enum"] == ["train", "car"]
    assert props["mode"]["default"] == "train"
    assert props["note"] == {"type": "string"}  # optional already says "may be left out": no null branch, no default
    nested = schema["$defs"]["Place"]
    assert nested["required"] == ["city"]
    assert nested["properties"]["country"]["default"] == "DE"
    assert "title" not in json.dumps(schema)  # pydantic's generated titles are dropped


async def test_context_parameter_is_injected_and_not_in_the_schema(context: ToolContext) -> None:
    registry = ToolRegistry()
    registry.register(whoami)
    (spec,) = registry.specs()
    assert set(spec.parameters["properties"]) == {"shout"}
    assert "required" not in spec.parameters
    result = await registry.execute(call("whoami", {"shout": True}), context)
    assert result == ToolResult("c1", "whoami", "CONSOLE:ALICE", is_error=False)


async def test_a_tool_without_parameters_has_an_empty_object_schema() -> None:
    registry = ToolRegistry()
    registry.register(structured)
    assert registry.specs()[0].parameters == {"type": "object", "properties": {}, "additionalProperties": False}


async def test_only_the_offered_tools_are_registered_but_every_one_is_checked(context: ToolContext) -> None:
    registry = ToolRegistry(offered={"echo"})
    registry.register(echo)
    registry.register(boom)
    assert registry.names == ("echo",)
    assert (await registry.execute(call("boom", {"text": "x"}), context)).is_error
    with pytest.raises(ValueError, match="description"):
        registry.register(echo, name="undescribed", description="")  # not offered, still refused


async def test_the_schema_carries_no_keys_that_tell_the_model_nothing(context: ToolContext) -> None:
    async def tag(
        must: int | None,
        labels: Annotated[dict[str, Any] | None, Field(description="Labels to set.")] = None,
        either: str | int | None = None,
        maybe: int | None = 3,
    ) -> str:
        """Optional and nullable parameters."""
        return f"{labels}/{either}/{maybe}/{must}"

    registry = ToolRegistry()
    registry.register(tag)
    props = registry.specs()[0].parameters["properties"]
    # Defaulting to None: no null branch, no `default: null`, no `additionalProperties: true` on a dict.
    assert props["labels"] == {"type": "object", "description": "Labels to set."}
    assert props["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    # A real default, or null as a value the model must choose, stays as it is.
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3}
    assert props["must"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    # An explicit null is still accepted where the schema no longer mentions it.
    result = await registry.execute(call("tag", {"labels": None, "either": None, "must": None}), context)
    assert result.content == "None/None/3/None"


async def test_parameter_names_that_shadow_pydantic_attributes_work(context: ToolContext) -> None:
    async def dump(json: str, copy: int = 1, model_config: str = "x", title: str = "t") -> str:
        """Parameters named like BaseModel attributes and JSON-schema keywords."""
        return f"{json}{copy}{model_config}{title}"

    registry = ToolRegistry()
    registry.register(dump)
    schema = registry.specs()[0].parameters
    assert schema["required"] == ["json"]
    assert schema["properties"]["title"] == {"type": "string", "default": "t"}
    result = await registry.execute(call("dump", {"json": "a", "copy": 2}), context)
    assert result.content == "a2xt"


async def test_name_and_description_can_be_overridden_and_decorators_register() -> None:
    registry = ToolRegistry()
    registry.register(echo, name="say", description="Repeat after me.")

    @registry.tool
    async def first(text: str) -> str:
        """First."""
        return text

    @registry.tool(name="second-one")
    async def second(text: str) -> str:
        """Second."""
        return text

    assert [(s.name, s.description) for s in registry.specs()] == [
        ("say", "Repeat after me."),
        ("first", "First."),
        ("second-one", "Second."),
    ]
    assert registry.names == ("say", "first", "second-one")
    assert first.__name__ == "first"  # the decorator hands the function back


@pytest.mark.parametrize("name", ["", "has space", "dotted.name", "ü", "x" * 65])
async def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        ToolRegistry().register(echo, name=name)


async def test_duplicate_names_are_refused() -> None:
    registry = ToolRegistry()
    registry.register(echo)
    with pytest.raises(ToolDefinitionError, match="already offered"):
        registry.register(boom, name="echo")


async def test_functions_that_cannot_be_tools_are_refused() -> None:
    def sync_tool(text: str) -> str:
        """Not async."""
        return text

    async def undocumented(text: str) -> str:
        return text

    async def untyped(text) -> str:  # type: ignore[no-untyped-def]
        """No hint."""
        return str(text)

    async def variadic(*texts: str) -> str:
        """Varargs."""
        return "".join(texts)

    registry = ToolRegistry()
    with pytest.raises(ValueError, match="async def"):
        registry.register(sync_tool)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="description"):
        registry.register(undocumented)
    with pytest.raises(ValueError, match="type hint"):
        registry.register(untyped)
    with pytest.raises(ValueError, match="named parameter"):
        registry.register(variadic)
    assert registry.specs() == []


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
    assert "test_registry.py" in warning.getMessage()


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
