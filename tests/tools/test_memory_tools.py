"""The memory tools through the registry (schemas, validation, errors as results) on real services."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from klaw.home import KlawHome
from klaw.llm.messages import ToolCall
from klaw.memory.archival_memory import SAVE_TOOL, ArchivalMemory
from klaw.memory.conversation_details import ConversationDetails
from klaw.memory.core_memory import CoreMemory
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from klaw.tools.builtin.memory_tools import MemoryServices, register_memory_tools
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext
from tests.memory.archive_helpers import DIM, ME, OTHER, ScriptedChat

NAMES = ("fetch_conversation_details", "memory_save", "memory_search", "memory_core_get", "memory_core_update")


@pytest.fixture
def chat(home: KlawHome, store: SqliteStore) -> ScriptedChat:
    return ScriptedChat(home, store)


@pytest.fixture
def registry(home: KlawHome, store: SqliteStore, chat: ScriptedChat) -> ToolRegistry:
    registry = ToolRegistry()
    archival = ArchivalMemory(chat.ingestion, FakeEmbedder(DIM), chat.tick, max_chars=200)
    services = MemoryServices(ConversationDetails(store), archival, CoreMemory(home.core_memory_file), 120, window=0)
    register_memory_tools(registry, services)
    return registry


async def call(registry: ToolRegistry, name: str, arguments: dict[str, Any], chat: ChatRef = ME) -> ToolResult:
    context = ToolContext(chat=chat, workspace=Path("/nonexistent"))
    return await registry.execute(ToolCall(id="c1", name=name, arguments=json.dumps(arguments)), context)


def test_the_five_tools_and_their_schemas(registry: ToolRegistry) -> None:
    assert registry.names == NAMES and SAVE_TOOL in registry.names
    specs = {spec.name: spec.parameters for spec in registry.specs()}
    assert set(specs["fetch_conversation_details"]["properties"]) == {
        "segment_id",
        "exchange_id",
        "include_full_transcript",
    }
    assert specs["memory_save"]["required"] == ["text"]
    assert specs["memory_search"]["required"] == ["query"]
    limit = specs["memory_search"]["properties"]["limit"]
    assert limit == {"default": 5, "maximum": 20, "minimum": 1, "type": "integer"}
    assert specs["memory_core_get"]["properties"] == {}
    assert set(specs["memory_core_update"]["properties"]) == {"set", "remove"}
    assert all(spec["additionalProperties"] is False for spec in specs.values())


async def test_fetch_conversation_details_by_segment_and_by_exchange(
    registry: ToolRegistry, chat: ScriptedChat
) -> None:
    turn = await chat.turn("the car needs new tyres", reply="Book them for Friday.", tools=[("calendar", "free")])
    exchange_id = await chat.exchange_id(turn)
    by_segment = await call(registry, "fetch_conversation_details", {"segment_id": turn.opened.segment_id})
    assert not by_segment.is_error
    segment = json.loads(by_segment.content)
    assert [e["exchange_id"] for e in segment["exchanges"]] == [exchange_id]
    assert "messages" not in segment["exchanges"][0]
    arguments = {"exchange_id": exchange_id, "include_full_transcript": True}
    full = json.loads((await call(registry, "fetch_conversation_details", arguments)).content)
    assert full["user_message"] == "the car needs new tyres"
    assert [m["role"] for m in full["messages"]] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"segment_id": 4242}, "there is no segment 4242 in this chat"),
        ({"exchange_id": 4242}, "there is no exchange 4242 in this chat"),
        ({}, "give exactly one of segment_id or exchange_id"),
        ({"segment_id": 1, "exchange_id": 1}, "give exactly one of segment_id or exchange_id"),
        ({"segment_id": "first"}, "segment_id"),
    ],
)
async def test_fetch_conversation_details_errors_are_results_the_model_reads(
    registry: ToolRegistry, arguments: dict[str, Any], message: str
) -> None:
    result = await call(registry, "fetch_conversation_details", arguments)
    assert result.is_error and message in result.content


async def test_another_chats_segment_is_not_found(registry: ToolRegistry, chat: ScriptedChat) -> None:
    theirs = await chat.turn("their thing", reply="ok", chat=OTHER)
    result = await call(registry, "fetch_conversation_details", {"segment_id": theirs.opened.segment_id})
    assert result.is_error and "no segment" in result.content and "their thing" not in result.content


async def test_memory_save_then_search_in_this_chat_only(registry: ToolRegistry, chat: ScriptedChat) -> None:
    saved = await call(registry, "memory_save", {"text": "the dentist is Dr. Sousa, Tuesdays only"})
    assert saved.content.startswith("Saved as memory ")
    again = await call(registry, "memory_save", {"text": "the dentist is Dr. Sousa, Tuesdays only"})
    assert again.content.startswith("Already saved as memory")
    await chat.turn("my dentist appointment moved", reply="noted the dentist change")
    results = json.loads((await call(registry, "memory_search", {"query": "dentist", "limit": 3})).content)
    assert [r["kind"] for r in results].count("memory") == 1
    memory = next(r for r in results if r["kind"] == "memory")
    assert memory["text"] == "the dentist is Dr. Sousa, Tuesdays only" and memory["matched_by"] == "words"
    message = next(r for r in results if r["kind"] == "message")
    assert message["exchange_id"] is not None and message["segment_id"] is not None
    nothing = await call(registry, "memory_search", {"query": "dentist"}, chat=OTHER)
    assert nothing.content == "No saved memory or earlier message matches."
    too_long = await call(registry, "memory_save", {"text": "x" * 201})
    assert too_long.is_error and "at most 200" in too_long.content


async def test_core_memory_get_and_update_with_validation_and_cap(registry: ToolRegistry, home: KlawHome) -> None:
    assert json.loads((await call(registry, "memory_core_get", {})).content) == {
        "memory": {},
        "chars": 2,
        "max_chars": 120,
    }
    set_two = await call(registry, "memory_core_update", {"set": {"name": "Ada", "city": "Porto"}})
    updated = json.loads(set_two.content)
    assert updated["memory"] == {"name": "Ada", "city": "Porto"} and updated["chars"] <= 120
    removed = await call(registry, "memory_core_update", {"remove": ["city"]})
    assert json.loads(removed.content)["memory"] == {"name": "Ada"}
    assert json.loads(home.core_memory_file.read_text(encoding="utf-8")) == {"name": "Ada"}
    too_big = await call(registry, "memory_core_update", {"set": {"story": "long " * 40}})
    assert too_big.is_error and "over its limit of 120" in too_big.content
    nothing = await call(registry, "memory_core_update", {})
    assert nothing.is_error and "give keys to set or to remove" in nothing.content
    null = await call(registry, "memory_core_update", {"set": {"name": None}})
    assert null.is_error and "null" in null.content
