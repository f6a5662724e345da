"""The tool registry: schemas derived from signatures and docstrings, names and functions checked as they
are registered (calls and their failures: test_registry_calls.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext, ToolDefinitionError
from tests.tools.registry_samples import (
    boom,
    call,
    context_for,
    echo,
    plan_trip,
    structured,
    whoami,
)


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
    def generator_tool(text: str) -> Iterator[str]:
        """Yields."""
        yield text

    async def undocumented(text: str) -> str:
        return text

    async def untyped(text) -> str:  # type: ignore[no-untyped-def]
        """No hint."""
        return str(text)

    async def variadic(*texts: str) -> str:
        """Varargs."""
        return "".join(texts)

    registry = ToolRegistry()
    with pytest.raises(ValueError, match="yields its results"):
        registry.register(generator_tool)
    with pytest.raises(ValueError, match="description"):
        registry.register(undocumented)
    with pytest.raises(ValueError, match="type hint"):
        registry.register(untyped)
    with pytest.raises(ValueError, match="named parameter"):
        registry.register(variadic)
    assert registry.specs() == []
