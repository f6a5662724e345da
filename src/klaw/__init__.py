"""klaw: a self-hosted personal AI agent engine with long-term conversational memory.

The library API, curated (docs/library.md, decision 092): open an engine on a home with `Klaw`,
`await agent.ask(chat, text)`, close it with `async with`. Names load on first use, so importing a
submodule (the gateway, a channel) does not load the whole engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Klaw": "klaw.library",
    "TurnFailed": "klaw.library",
    "HistoryEntry": "klaw.engine.chat_reading",
    "MemoryFound": "klaw.engine.chat_reading",
    "SessionInfo": "klaw.engine.chat_reading",
    "TurnState": "klaw.engine.chat_reading",
    "ChatRef": "klaw.store.records",
    "EngineConfig": "klaw.config",
    "KlawHome": "klaw.home",
    "Clock": "klaw.engine.clock",
    "ManualClock": "klaw.engine.clock",
    "SystemClock": "klaw.engine.clock",
    "ChatModel": "klaw.llm.protocol",
    "FunctionModel": "klaw.llm.function_model",
    "ChatMessage": "klaw.llm.messages",
    "ChatResponse": "klaw.llm.messages",
    "ToolCall": "klaw.llm.messages",
    "LlmError": "klaw.llm.errors",
    "Embedder": "klaw.memory.embedder.protocol",
    "ToolContext": "klaw.tools.schema",
    "ToolSetup": "klaw.tools.groups",
}

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatRef",
    "ChatResponse",
    "Clock",
    "Embedder",
    "EngineConfig",
    "FunctionModel",
    "HistoryEntry",
    "Klaw",
    "KlawHome",
    "LlmError",
    "ManualClock",
    "MemoryFound",
    "SessionInfo",
    "SystemClock",
    "ToolCall",
    "ToolContext",
    "ToolSetup",
    "TurnFailed",
    "TurnState",
    "__version__",
]

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.engine.chat_reading import HistoryEntry, MemoryFound, SessionInfo, TurnState
    from klaw.engine.clock import Clock, ManualClock, SystemClock
    from klaw.library import Klaw, TurnFailed
    from klaw.llm.errors import LlmError
    from klaw.llm.function_model import FunctionModel
    from klaw.llm.messages import ChatMessage, ChatResponse, ToolCall
    from klaw.llm.protocol import ChatModel
    from klaw.memory.embedder.protocol import Embedder
    from klaw.store.records import ChatRef
    from klaw.tools.groups import ToolSetup
    from klaw.tools.schema import ToolContext


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'klaw' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
