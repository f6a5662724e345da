"""The sample tools the registry's tests register (tests/tools/test_registry.py, test_registry_calls.py): one
of every kind of parameter, a tool that reads its context, one that fails, results that are no string."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.schema import ToolContext


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
