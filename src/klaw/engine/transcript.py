"""Stored messages → chat messages for a model, keeping tool calls and their results paired.

A window cut at an arbitrary message can start with tool results whose call was cut off: providers
reject them, so they are dropped here, in one place. A result stored after a message the person sent
while the call ran is put back after its call (decision 360). A tool call whose results were never written
(the engine was killed while its tools ran, or the turn failed) is kept, each missing result said
to be unknown (`UNKNOWN_RESULT`): dropping the call made the resumed turn ask the model afresh, and
a model not shown what it had already set going (a message sent, a command run) did it again
(decision 299). A record whose metadata has a shape no model message
can be made from (store/log_format.metadata_problem, the rule every reader of the log applies) is left
out too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from klaw.llm.messages import ChatMessage, ToolCall
from klaw.store.log_format import metadata_problem
from klaw.store.records import MessageRecord, MessageType, RecordKind, StoredMessage


def tool_calls_metadata(calls: Sequence[ToolCall]) -> dict[str, Any]:
    return {"tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]}


def to_chat_message(message: StoredMessage) -> ChatMessage | None:
    return record_to_chat_message(message.record)


def record_to_chat_message(record: MessageRecord) -> ChatMessage | None:
    """One log record as a model sees it; None for records a model is never shown (control)."""
    if record.metadata is not None and metadata_problem(record.type, record.metadata) is not None:
        return None  # a store rebuilt from a log line of that shape before the log's reader refused it
    metadata = record.metadata or {}
    if record.type is MessageType.TOOL_CALL:
        calls = tuple(
            ToolCall(id=str(c["id"]), name=str(c["name"]), arguments=str(c.get("arguments", "")))
            for c in metadata.get("tool_calls", [])
        )
        return ChatMessage.assistant(record.content or None, calls)
    if record.type is MessageType.TOOL_RESULT:
        return ChatMessage.tool(str(metadata.get("tool_call_id", "")), record.content, name=metadata.get("name"))
    if record.kind is RecordKind.USER_MESSAGE:
        return ChatMessage.user(record.content)
    if record.kind is RecordKind.REPLY:
        return ChatMessage.assistant(record.content)
    return None  # control records, and text of other roles


def to_chat_messages(messages: Sequence[StoredMessage]) -> list[ChatMessage]:
    converted = [m for m in (to_chat_message(s) for s in messages) if m is not None]
    return paired_tool_messages(converted)


# Any cause, not only a crash: a /forget or a stop also ends a turn whose call waits for approval (adversary14).
# A call whose question was open at a kill -9 has its own result by then, "never approved" (decision 447).
UNKNOWN_RESULT = (
    "No result of this call was recorded: its turn ended before the call finished (a restart, a crash, an"
    " error, a stop or a /forget), so it may or may not have taken effect. Check before doing it again."
)


def paired_tool_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Tool results without their call dropped; a call's missing results given as `UNKNOWN_RESULT`."""
    kept: list[ChatMessage] = []
    moved: set[int] = set()  # results taken up to their call from past a person's message
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "tool" or i in moved:
            i += 1  # a result whose call is not (or no longer) before it, or one already placed after it
            continue
        if message.role == "assistant" and message.tool_calls:
            wanted = {c.id for c in message.tool_calls}
            j = i + 1
            results: list[ChatMessage] = []
            while j < len(messages) and messages[j].role == "tool":
                results.append(messages[j])
                j += 1
            found = {r.tool_call_id for r in results}
            # A message the person sent while the call ran (an approval waiting, a long command) is stored
            # before its results: they are still this call's, up to the turn's next assistant message.
            k = j
            while wanted - found and k < len(messages) and messages[k].role != "assistant":
                if messages[k].role == "tool" and messages[k].tool_call_id in wanted - found:
                    results.append(messages[k])
                    found.add(messages[k].tool_call_id)
                    moved.add(k)
                k += 1
            kept.append(message)
            kept.extend(r for r in results if r.tool_call_id in wanted)
            kept.extend(
                ChatMessage.tool(c.id, UNKNOWN_RESULT, name=c.name) for c in message.tool_calls if c.id not in found
            )
            i = j
            continue
        kept.append(message)
        i += 1
    return kept
