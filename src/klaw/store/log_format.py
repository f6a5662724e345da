"""One conversation-log line: the JSON encoding of a `MessageRecord`, and its strict decoding.

Decoding raises `MalformedLine` with a reason that never quotes the line (it may hold private
text), so callers can log file, line number and reason safely. A line every later step could not
handle (nested too deep, a `\ud800` escape that is not text) is malformed here, so no reader of
the log (start-up recovery, reindex, `klaw log check`, a task's history) stops on it; so is a line
whose metadata has a shape a turn cannot use (`metadata_problem`: a tool call's `tool_calls` not a
list of calls), which would otherwise fail every turn of its chat.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from klaw import strict_json
from klaw.errors import KlawError
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role

MAX_RECORD_BYTES = 32 * 1024 * 1024
"""The longest log line a reader takes (decision 329). The longest record klaw writes is a model's answer,
at most 2,000,000 characters (llm/answer_cap.py), each at most 6 bytes in JSON (a `\\uXXXX` escape): 12 MB,
with room for its metadata. A longer line is malformed, reported and skipped without being held."""
TOO_LONG = f"longer than {MAX_RECORD_BYTES // (1024 * 1024)} MiB, more than any record klaw writes"


class MalformedLine(KlawError, ValueError):
    """A log line that cannot be decoded; `str()` is safe to log (no content)."""


def encode_record(record: MessageRecord) -> str:
    """The record as one JSON line (no trailing newline)."""
    line: dict[str, Any] = {
        "id": record.id,
        "channel": record.chat.channel,
        "chat_id": record.chat.chat_id,
        "role": record.role.value,
        "type": record.type.value,
        "content": record.content,
        "created_at": record.created_at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    if record.metadata is not None:
        line["metadata"] = record.metadata
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def decode_record(line: str) -> MessageRecord:
    try:
        # The line without its line end: json counted an error at the end of `{"broken": ` on the line
        # after it ("column 1"), not at column 12 where the value is missing.
        data = strict_json.loads(line.rstrip("\r\n"))  # too deep, lone surrogates, NaN: refused here
    except strict_json.StrictJsonError as exc:
        raise MalformedLine(str(exc)) from None
    if not isinstance(data, dict):
        raise MalformedLine("a line must be a JSON object")
    try:
        fields = {name: data[name] for name in ("id", "channel", "chat_id", "role", "type", "content", "created_at")}
    except KeyError as missing:
        raise MalformedLine(f"missing field {missing}") from None
    for name, value in fields.items():
        if not isinstance(value, str):
            raise MalformedLine(f"field {name!r} must be a string")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise MalformedLine("field 'metadata' must be an object")
    if (problem := metadata_problem(fields["type"], metadata)) is not None:
        raise MalformedLine(problem)
    try:
        created_at = datetime.fromisoformat(fields["created_at"])
        if created_at.tzinfo is None:
            raise ValueError
        return MessageRecord(
            chat=ChatRef(fields["channel"], fields["chat_id"]),
            role=Role(fields["role"]),
            type=MessageType(fields["type"]),
            content=fields["content"],
            id=fields["id"],
            created_at=created_at.astimezone(UTC),
            metadata=metadata,
        )
    except ValueError as exc:
        reason = "created_at must be an ISO-8601 time with a zone" if "created_at" in repr(exc) else None
        raise MalformedLine(reason or _field_problem(fields)) from None


_TOOL_CALL, _TOOL_RESULT = MessageType.TOOL_CALL.value, MessageType.TOOL_RESULT.value  # read once: decision 254


def metadata_problem(record_type: str, metadata: dict[str, Any] | None) -> str | None:
    """Why the metadata of a record of `record_type` has a shape the turn cannot use, or None.

    The fields read as they are, without a check of their own, on every turn: a tool call's
    `tool_calls` (a list of {id, name, arguments} strings, made into the model's messages by
    engine/transcript.py), a tool result's `tool_call_id` and `name`, the `task`/`source`/`origin`
    labels of a message sent unasked. Before, `"tool_calls": "notalist"` passed `klaw log check` and
    `klaw reindex`, then failed every turn of its chat (TypeError) until it left the window. Other
    control records' metadata (exchanges, forget, summaries, model switches) is read tolerantly by its
    folds and needs no rule here. The reason names the field, never its value."""
    if metadata is None:
        return None
    if record_type == _TOOL_CALL and (problem := _tool_calls_problem(metadata.get("tool_calls", []))):
        return problem
    if record_type == _TOOL_RESULT and not (
        isinstance(metadata.get("tool_call_id", ""), str) and isinstance(metadata.get("name"), str | None)
    ):
        return "metadata.tool_call_id and metadata.name of a tool_result record must be strings"
    for label in ("task", "source", "origin"):
        if not isinstance(metadata.get(label), str | None):
            return f"metadata.{label} must be a string"
    return None


def _tool_calls_problem(calls: object) -> str | None:
    if not isinstance(calls, list):
        return "metadata.tool_calls of a tool_call record must be a list"
    for call in calls:
        if not isinstance(call, dict):
            return "each of metadata.tool_calls must be an object"
        if not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
            return "each of metadata.tool_calls must have an id and a name (strings)"
        if not isinstance(call.get("arguments", ""), str):
            return "metadata.tool_calls[].arguments must be a string (the call's JSON)"
    return None


def _field_problem(fields: dict[str, str]) -> str:
    if fields["role"] not in {r.value for r in Role}:
        return "unknown role"
    if fields["type"] not in {t.value for t in MessageType}:
        return "unknown type"
    try:
        datetime.fromisoformat(fields["created_at"])
    except ValueError:
        return "created_at is not an ISO-8601 time"
    return "invalid channel or chat_id, or created_at without a time zone"
