"""The memory tools: `fetch_conversation_details`, `memory_save`, `memory_search`, `memory_core_get`,
`memory_core_update`.

Closures over the memory services, registered by the engine once it has them (this package imports
nothing from the engine). Everything is scoped to the chat that called: a tool never reads or
writes another chat's conversations or memories. A scheduled task's run has no conversation of its
own and sees core memory read-only: it is not offered the conversation tools and `memory_core_update`,
and the tool loop answers a call to a tool not offered itself (decision 258). Mistakes raise
ValueError, which the registry hands back to the model as a readable error.
A change to core memory is announced in the chat whose turn made it (`MemoryServices.announce`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Annotated, Any

from pydantic import Field

from klaw.memory.archival_memory import ArchivalMemory, ArchivalResult
from klaw.memory.conversation_details import ConversationDetails
from klaw.memory.core_memory import CoreMemory
from klaw.store.records import MAX_ROW_ID, ChatRef
from klaw.tools.calls import ToolRefusal
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

log = logging.getLogger(__name__)

NOTICE_VALUE_CHARS = 300  # a value longer than this is cut in the chat's notice of a core memory change
RESULT_TEXT_CHARS = 700  # one memory_search result; fetch_conversation_details has the whole text


Announce = Callable[[ChatRef, str], Awaitable[None]]  # a notice into a chat, outside the model's reply


@dataclass(frozen=True)
class MemoryServices:
    details: ConversationDetails
    archival: ArchivalMemory
    core: CoreMemory
    core_max_chars: int  # memory.coreMaxChars
    window: int  # context.slidingWindow: messages memory_search leaves out (the model sees them already)
    announce: Announce | None = None  # where a change to core memory is shown (the chat that made it)


RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID)]
"""A segment or exchange id as the model gives it: checked against what a store can hold before any
lookup (10**30 answered "OverflowError: int too big to convert"), the web API's rule."""


def register_memory_tools(registry: ToolRegistry, services: MemoryServices) -> None:
    """Offer the five memory tools, bound to `services`."""

    async def fetch_conversation_details(
        context: ToolContext,
        segment_id: RowId | None = None,
        exchange_id: RowId | None = None,
        include_full_transcript: Annotated[bool, Field(description="Every message and tool call too")] = False,
    ) -> dict[str, Any]:
        """Read a past conversation (segment_id) or exchange (exchange_id) of this chat, ids as memory_search
        or the context give them."""
        if (segment_id is None) == (exchange_id is None):
            raise ToolRefusal("give exactly one of segment_id or exchange_id")
        return await services.details.fetch(
            context.chat, segment_id=segment_id, exchange_id=exchange_id, full_transcript=include_full_transcript
        )

    async def memory_save(
        context: ToolContext,
        text: Annotated[str, Field(description="Self-contained")],
    ) -> str:
        """Save a fact or note for memory_search to find later in this chat."""
        saved = await services.archival.save(context.chat, text)
        if not saved.created:
            return f"Already saved as memory {saved.memory_id}; nothing added."
        return f"Saved as memory {saved.memory_id}."

    async def memory_search(
        context: ToolContext,
        query: str,
        limit: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> list[dict[str, Any]] | str:
        """Search this chat's saved memories and past messages, best first."""
        results = await services.archival.search(context.chat, query, limit=limit, skip_recent=services.window)
        if not results:
            return "No saved memory or earlier message matches."
        return [_result(r) for r in results]

    async def memory_core_get() -> dict[str, Any]:
        """Core memory (kept in every context), its size and limit."""
        memory = await services.core.read()
        return {
            "memory": memory,
            "chars": len(CoreMemory.render(memory)),
            "max_chars": services.core_max_chars,
        }

    async def memory_core_update(
        context: ToolContext,
        set: Annotated[dict[str, Any] | None, Field(description='e.g. {"city": "Porto"}')] = None,
        remove: Annotated[list[str] | None, Field(description="Keys")] = None,
    ) -> dict[str, Any]:
        """Change core memory: lasting key facts about the person only (size-limited; else memory_save)."""
        if not set and not remove:
            raise ToolRefusal("give keys to set or to remove")
        before = await services.core.read()
        memory = await services.core.update(set or {}, remove or [], max_chars=services.core_max_chars)
        notice = core_change_notice(before, memory)
        if notice is not None and services.announce is not None:
            try:
                await services.announce(context.chat, notice)
            except Exception as exc:  # the change is made; a notice that cannot go out must not undo the call
                log.warning("core memory change not shown in %s: %s", context.chat, type(exc).__name__)
        return {"memory": memory, "chars": len(CoreMemory.render(memory)), "max_chars": services.core_max_chars}

    for tool in (fetch_conversation_details, memory_save, memory_search, memory_core_get, memory_core_update):
        registry.register(tool)


def core_change_notice(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """What changed in core memory, for the person (None: nothing). Core memory is in every later turn of
    every chat, so an instruction slipped into it (a prompt injection) would steer them all: the chat
    whose turn changed it is shown each key set or removed, values literally, long ones cut."""
    changes = [f"{_key(k)} = {_value(v)}" for k, v in after.items() if k not in before or before[k] != v]
    removed = [_key(k) for k in before if k not in after]
    if not changes and not removed:
        return None
    lines = ["Core memory changed (kept in every chat's context; /memory shows it all):"]
    lines += [f"+ {change}" for change in changes] + [f"- {key} (removed)" for key in removed]
    return "\n".join(lines)


def _key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= NOTICE_VALUE_CHARS else text[: NOTICE_VALUE_CHARS - 1] + "…"


def _result(result: ArchivalResult) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": result.kind}
    if result.kind == "memory":
        item["memory_id"] = result.id
    else:
        item["role"] = result.role
        item["exchange_id"] = result.exchange_id
    item["segment_id"] = result.segment_id
    item["at"] = result.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = result.text
    if len(text) > RESULT_TEXT_CHARS:
        text = text[:RESULT_TEXT_CHARS] + f"… [{len(result.text) - RESULT_TEXT_CHARS} more characters]"
    item["text"] = text
    item["matched_by"] = _matched_by(result)
    return item


def _matched_by(result: ArchivalResult) -> str:
    sides = [name for name, hit in (("meaning", result.distance), ("words", result.fts_rank)) if hit is not None]
    return " and ".join(sides) or "next to a match"  # a neighbour the search adds as context
