"""A chat's memory for another MCP client (`klaw mcp serve`): the model's own memory tools, over one chat.

The same functions the model calls (`memory_search`, `fetch_conversation_details`, `memory_core_get`,
`memory_save`) in a registry of their own, so they are there whatever `tools.enabled` offers the
model, and with nothing left out of a search: the other client has none of this chat's recent
messages in its context, unlike the model, whose window `memory_search` skips. Asked in-process (the
library, `Engine.memory_access`) or over the socket (the `memory_tool` query), so the engine stays
the only process that opens klaw.db. Whether saving is allowed is the MCP server's to decide
(`--allow-write`): the socket is the person's own (0600). The `scheduler` channel holds task logs, no
chat's memory: it is refused here, as `klaw mcp serve --chat` refuses it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klaw.engine.frame_dispatch import QueryError
from klaw.llm.messages import ToolCall
from klaw.scheduling.names import SUBAGENT_CHANNEL
from klaw.store.records import ChatRef
from klaw.tools.builtin.memory_tools import MemoryServices, register_memory_tools
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

SHARED_TOOLS = ("memory_search", "fetch_conversation_details", "memory_core_get", "memory_save")


class MemoryAccess:
    def __init__(self, services: MemoryServices, workspace: Path) -> None:
        self._registry = ToolRegistry(offered=SHARED_TOOLS)
        register_memory_tools(self._registry, dataclasses.replace(services, window=0))
        self._workspace = workspace

    async def call(self, chat: ChatRef, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run one of the shared tools for `chat`; mistakes come back as an error result, never raised."""
        if chat.channel == SUBAGENT_CHANNEL:
            return ToolResult(
                "mcp", name, f"the {SUBAGENT_CHANNEL!r} channel holds task logs, not a chat's memory", True
            )
        if name not in SHARED_TOOLS:
            return ToolResult("mcp", name, f"unknown tool {name[:64]!r}; shared: {', '.join(SHARED_TOOLS)}", True)
        call = ToolCall(id="mcp", name=name, arguments=json.dumps(dict(arguments)))
        return await self._registry.execute(call, ToolContext(chat, self._workspace))

    async def answer(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The socket's `memory_tool` query: {channel, chat_id, name, arguments} → {text, is_error}."""
        channel, chat_id, name = params.get("channel"), params.get("chat_id"), params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(channel, str) or not isinstance(chat_id, str) or not isinstance(name, str):
            raise QueryError("name the chat (channel, chat_id) and the tool (name)")
        if not isinstance(arguments, dict):
            raise QueryError("arguments must be a JSON object")
        try:
            chat = ChatRef(channel, chat_id)
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        result = await self.call(chat, name, arguments)
        return {"text": result.content, "is_error": result.is_error}
