"""klaw: a self-hosted personal AI agent engine with long-term conversational memory.

The library API, curated (docs/library.md, decision 092): open an engine on a home with `Klaw`,
`await agent.ask(chat, text)`, close it with `async with`. Names load on first use, so importing a
submodule (the gateway, a channel) does not load the whole engine.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# A library leaves its log's destination to the program (the logging HOWTO's advice for libraries): without
# this, Python's last-resort handler printed klaw's warnings as bare lines into a program's stderr. The
# `klaw` command sets up its own handlers (cli/app.py); a program calls `logging.basicConfig` to see them.
logging.getLogger("klaw").addHandler(logging.NullHandler())

# A deliberate list (simonw/llm's `llm/__init__.py` is the model): what a program needs to open an engine,
# write a model, an embedder or a tool, and read a chat back. Everything else is internal.
_EXPORTS = {
    # the engine and what it answers
    "Klaw": "klaw.library",
    "TurnFailed": "klaw.library",
    "ReplyStream": "klaw.library_stream",
    "ReplyPiece": "klaw.library_stream",
    "AgentMessage": "klaw.library",
    "HistoryEntry": "klaw.engine.chat_reading",
    "MemoryFound": "klaw.engine.chat_reading",
    "SessionInfo": "klaw.engine.chat_reading",
    "TurnState": "klaw.engine.chat_reading",
    "ChatRef": "klaw.store.records",
    # configuration and time
    "EngineConfig": "klaw.config",
    "KlawHome": "klaw.home",
    "Clock": "klaw.engine.clock",
    "ManualClock": "klaw.engine.clock",
    "SystemClock": "klaw.engine.clock",
    # a chat model: the protocol, what it is given and returns, and a model written as a function
    "ChatModel": "klaw.llm.protocol",
    "StreamAccumulator": "klaw.llm.protocol",
    "ChatMessage": "klaw.llm.messages",
    "ChatResponse": "klaw.llm.messages",
    "StreamDelta": "klaw.llm.messages",
    "ToolCall": "klaw.llm.messages",
    "ToolCallFragment": "klaw.llm.messages",
    "ToolSpec": "klaw.llm.messages",
    "Usage": "klaw.llm.messages",
    "FunctionModel": "klaw.llm.function_model",
    "AgentInfo": "klaw.llm.function_model",
    "call_tool": "klaw.llm.function_model",
    "tool_calls": "klaw.llm.function_model",
    # an embedder
    "Embedder": "klaw.memory.embedder.protocol",
    # tools
    "ToolContext": "klaw.tools.schema",
    "ToolSetup": "klaw.tools.groups",
    "ToolFunction": "klaw.tools.schema",
    "ToolRow": "klaw.tools.inventory",
    "private_open": "klaw.private_files",
    "requires_approval": "klaw.tools.registry",
    # errors
    "KlawError": "klaw.errors",
    "ConfigError": "klaw.config_loader",
    "ForgetError": "klaw.memory.forget_targets",
    "TaskRun": "klaw.library_tasks",
    "TaskRunRefused": "klaw.library_tasks",
    "LlmError": "klaw.llm.errors",
    "LlmAuthError": "klaw.llm.errors",
    "LlmBadRequestError": "klaw.llm.errors",
    "LlmConnectionError": "klaw.llm.errors",
    "LlmMalformedResponseError": "klaw.llm.errors",
    "LlmRateLimitError": "klaw.llm.errors",
    "LlmServerError": "klaw.llm.errors",
    "LlmTimeoutError": "klaw.llm.errors",
    "EmbedderError": "klaw.memory.embedder.protocol",
    "EngineAlreadyRunningError": "klaw.engine.socket_file",
    "MessageRefused": "klaw.message_text",
    "ToolDefinitionError": "klaw.tools.schema",
    "InvalidChat": "klaw.library_arguments",
    "InvalidArgument": "klaw.library_arguments",
    "OwnTurnRunning": "klaw.library_own_turn",
    "EngineNotOpen": "klaw.library",
    "OtherEventLoop": "klaw.library_loop",
    "HomeUnusable": "klaw.library_start",
    "StorageError": "klaw.store.protocol",
    "StorageUnavailable": "klaw.store.protocol",
}

__all__ = [
    "AgentInfo",
    "AgentMessage",
    "ChatMessage",
    "ChatModel",
    "ChatRef",
    "ChatResponse",
    "Clock",
    "ConfigError",
    "Embedder",
    "EmbedderError",
    "EngineAlreadyRunningError",
    "EngineConfig",
    "EngineNotOpen",
    "ForgetError",
    "FunctionModel",
    "HistoryEntry",
    "HomeUnusable",
    "InvalidArgument",
    "InvalidChat",
    "Klaw",
    "KlawError",
    "KlawHome",
    "LlmAuthError",
    "LlmBadRequestError",
    "LlmConnectionError",
    "LlmError",
    "LlmMalformedResponseError",
    "LlmRateLimitError",
    "LlmServerError",
    "LlmTimeoutError",
    "ManualClock",
    "MemoryFound",
    "MessageRefused",
    "OtherEventLoop",
    "OwnTurnRunning",
    "ReplyPiece",
    "ReplyStream",
    "SessionInfo",
    "StorageError",
    "StorageUnavailable",
    "StreamAccumulator",
    "StreamDelta",
    "SystemClock",
    "TaskRun",
    "TaskRunRefused",
    "ToolCall",
    "ToolCallFragment",
    "ToolContext",
    "ToolDefinitionError",
    "ToolFunction",
    "ToolRow",
    "ToolSetup",
    "ToolSpec",
    "TurnFailed",
    "TurnState",
    "Usage",
    "__version__",
    "call_tool",
    "private_open",
    "requires_approval",
    "tool_calls",
]

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.config_loader import ConfigError
    from klaw.engine.chat_reading import HistoryEntry, MemoryFound, SessionInfo, TurnState
    from klaw.engine.clock import Clock, ManualClock, SystemClock
    from klaw.engine.socket_file import EngineAlreadyRunningError
    from klaw.errors import KlawError
    from klaw.home import KlawHome
    from klaw.library import AgentMessage, EngineNotOpen, Klaw, TurnFailed
    from klaw.library_arguments import InvalidArgument, InvalidChat
    from klaw.library_loop import OtherEventLoop
    from klaw.library_own_turn import OwnTurnRunning
    from klaw.library_start import HomeUnusable
    from klaw.library_stream import ReplyPiece, ReplyStream
    from klaw.library_tasks import TaskRun, TaskRunRefused
    from klaw.llm.errors import (
        LlmAuthError,
        LlmBadRequestError,
        LlmConnectionError,
        LlmError,
        LlmMalformedResponseError,
        LlmRateLimitError,
        LlmServerError,
        LlmTimeoutError,
    )
    from klaw.llm.function_model import AgentInfo, FunctionModel, call_tool, tool_calls
    from klaw.llm.messages import (
        ChatMessage,
        ChatResponse,
        StreamDelta,
        ToolCall,
        ToolCallFragment,
        ToolSpec,
        Usage,
    )
    from klaw.llm.protocol import ChatModel, StreamAccumulator
    from klaw.memory.embedder.protocol import Embedder, EmbedderError
    from klaw.memory.forget_targets import ForgetError
    from klaw.message_text import MessageRefused
    from klaw.private_files import private_open
    from klaw.store.protocol import StorageError, StorageUnavailable
    from klaw.store.records import ChatRef
    from klaw.tools.groups import ToolSetup
    from klaw.tools.inventory import ToolRow
    from klaw.tools.registry import requires_approval
    from klaw.tools.schema import ToolContext, ToolDefinitionError, ToolFunction


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'klaw' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
