"""Tools registered again from the same `def`, as each engine start does with closures made for it: the
schema and the argument model built for the first registration are reused only when nothing they were
built from changed (decision 239); a default, a name, a description or a docstring of its own is seen."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext


def a_tool(limit: Any, doc: str | None = None) -> Any:
    """A closure as an engine makes one: its default and docstring from this engine's settings."""

    async def lookup(query: str, limit: int = limit) -> str:
        """Look something up."""
        return f"{query}:{limit!r}"

    if doc is not None:
        lookup.__doc__ = doc
    return lookup


def offered(fn: Any, **register: Any) -> tuple[ToolRegistry, dict[str, Any]]:
    registry = ToolRegistry()
    registry.register(fn, **register)
    (spec,) = registry.specs()
    return registry, {"name": spec.name, "description": spec.description, **dict(spec.parameters)}


async def answer(registry: ToolRegistry, name: str, tmp_path: Path) -> str:
    context = ToolContext(chat=ChatRef("console", "alice"), workspace=tmp_path)
    result = await registry.execute(ToolCall(id="c1", name=name, arguments=json.dumps({"query": "q"})), context)
    assert not result.is_error, result.content
    return result.content


async def test_each_registration_offers_and_uses_its_own_default(tmp_path: Path) -> None:
    first, first_spec = offered(a_tool(5))
    second, second_spec = offered(a_tool(9))
    assert first_spec["properties"]["limit"]["default"] == 5
    assert second_spec["properties"]["limit"]["default"] == 9
    assert await answer(first, "lookup", tmp_path) == "q:5"
    assert await answer(second, "lookup", tmp_path) == "q:9"


async def test_a_default_equal_but_of_another_type_is_its_own(tmp_path: Path) -> None:
    _, as_int = offered(a_tool(1))
    as_bool, as_bool_spec = offered(a_tool(True))  # True == 1, but it is not the same default
    assert as_int["properties"]["limit"]["default"] == 1
    assert as_bool_spec["properties"]["limit"]["default"] is True
    assert await answer(as_bool, "lookup", tmp_path) == "q:True"


def test_a_name_a_description_or_a_docstring_of_its_own_is_offered() -> None:
    _, plain = offered(a_tool(5))
    _, renamed = offered(a_tool(5), name="find")
    _, described = offered(a_tool(5), description="Find it in the notes.")
    _, documented = offered(a_tool(5, doc="Search the archive.\n\nArgs:\n    query: What to find."))
    assert (plain["name"], plain["description"]) == ("lookup", "Look something up.")
    assert (renamed["name"], renamed["description"]) == ("find", "Look something up.")
    assert (described["name"], described["description"]) == ("lookup", "Find it in the notes.")
    assert documented["description"] == "Search the archive."
    assert documented["properties"]["query"]["description"] == "What to find."
    assert "description" not in plain["properties"]["query"]


def test_a_schema_changed_by_one_registry_leaves_the_others_alone() -> None:
    first = ToolRegistry()
    first.register(a_tool(5))
    second = ToolRegistry()
    second.register(a_tool(5))
    (spec,) = first.specs()
    properties = spec.parameters["properties"]
    properties["limit"]["default"] = 7
    properties["extra"] = {"type": "string"}
    (other,) = second.specs()
    assert other.parameters["properties"] == {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}}
