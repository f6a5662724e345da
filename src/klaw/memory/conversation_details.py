"""`fetch_conversation_details`: a past segment or exchange of the chat, as a compact JSON-able dict.

The cross-conversation block and `memory_search` name segments and exchanges by id; this is how the
agent reads one of them in full. An exchange gives its user message(s), final reply and summary,
plus, on request, its whole transcript (tool calls and results included). A segment gives its
summary and its exchanges in order, each with the same fields.

Only the asking chat's segments and exchanges are found: an id of another chat is answered exactly
like an unknown one. Results are kept under `MAX_RESULT_CHARS` (the tool registry cuts longer ones
mid-JSON): long texts are shortened and, past the budget, a segment lists its remaining exchanges
by id only, to be fetched one by one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from klaw.errors import KlawError
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, Exchange, MessageType, RecordKind, StoredMessage

MAX_RESULT_CHARS = 12_000  # under the registry's 16,000-character cut, with room for the JSON around it
OVERVIEW_TEXT_CHARS = 300  # a user message or reply in a segment's list of exchanges
TRANSCRIPT_TEXT_CHARS = 4_000  # one message of a full transcript
TOOL_TEXT_CHARS = 600  # one tool call's arguments or one tool result


class DetailsError(KlawError, ValueError):
    """Nothing to show (unknown id, another chat's, no id given); the message is for the model."""


class SummarySource(Protocol):
    """Where summaries come from (the summarizer's store); absent summaries are None."""

    async def segment_summary(self, segment_id: int) -> str | None: ...

    async def exchange_summary(self, exchange_id: int) -> str | None: ...


class ConversationDetails:
    def __init__(self, store: Storage, summaries: SummarySource | None = None) -> None:
        self._store = store
        self._summaries = summaries

    async def fetch(
        self, chat: ChatRef, *, segment_id: int | None, exchange_id: int | None, full_transcript: bool
    ) -> dict[str, Any]:
        """The exchange if `exchange_id` is given, else the segment."""
        if exchange_id is not None:
            return await self.exchange(chat, exchange_id, full_transcript=full_transcript)
        if segment_id is not None:
            return await self.segment(chat, segment_id, full_transcript=full_transcript)
        raise DetailsError(
            "give segment_id or exchange_id (the ids appear in past-conversation context and memory_search results)"
        )

    async def exchange(self, chat: ChatRef, exchange_id: int, *, full_transcript: bool) -> dict[str, Any]:
        exchange = await self._store.exchanges.get(exchange_id)
        if exchange is None or exchange.chat != chat:
            raise DetailsError(f"there is no exchange {exchange_id} in this chat")
        records = await self._store.history.exchange_messages(exchange_id) or []
        return await self._exchange_view(exchange, records, full_transcript, TRANSCRIPT_TEXT_CHARS)

    async def segment(self, chat: ChatRef, segment_id: int, *, full_transcript: bool) -> dict[str, Any]:
        segment = await self._store.segments.get(segment_id)
        if segment is None or segment.chat != chat:
            raise DetailsError(f"there is no segment {segment_id} in this chat")
        exchanges = await self._store.exchanges.for_segment(segment_id)
        view: dict[str, Any] = {
            "segment_id": segment.id,
            "started_at": _time(segment.started_at),
            "ended_at": _time(segment.ended_at) if segment.ended_at else None,
            "current": segment.ended_at is None,
            "summary": await self._segment_summary(segment_id),
            "exchange_count": len(exchanges),
            "exchanges": [],
        }
        limit = TRANSCRIPT_TEXT_CHARS if full_transcript else OVERVIEW_TEXT_CHARS
        used = len(_dumps(view))
        for index, exchange in enumerate(exchanges):
            records = await self._store.history.exchange_messages(exchange.id) or []
            item = await self._exchange_view(exchange, records, full_transcript, limit)
            item.pop("segment_id", None)
            size = len(_dumps(item))
            if used + size > MAX_RESULT_CHARS and view["exchanges"]:
                view["more_exchange_ids"] = [e.id for e in exchanges[index:]]
                view["note"] = "Not all exchanges fit: fetch the others with exchange_id."
                break
            view["exchanges"].append(item)
            used += size
        return view

    async def _exchange_view(
        self, exchange: Exchange, records: Sequence[StoredMessage], full: bool, limit: int
    ) -> dict[str, Any]:
        users = [m.content for m in records if m.kind is RecordKind.USER_MESSAGE]
        final = next((m for m in records if m.rowid == exchange.final_message_rowid), None)
        view: dict[str, Any] = {
            "exchange_id": exchange.id,
            "segment_id": exchange.segment_id,
            "status": exchange.status.value,
            "started_at": _time(exchange.started_at),
            "ended_at": _time(exchange.ended_at) if exchange.ended_at else None,
            "summary": await self._exchange_summary(exchange.id),
            "user_message": _clip("\n".join(users), limit) if users else None,
            "assistant_message": _clip(final.content, limit) if final is not None else None,
        }
        if full:
            view["messages"] = [_transcript_entry(m, limit) for m in records if not m.record.is_control]
        return view

    async def _segment_summary(self, segment_id: int) -> str | None:
        return None if self._summaries is None else await self._summaries.segment_summary(segment_id)

    async def _exchange_summary(self, exchange_id: int) -> str | None:
        return None if self._summaries is None else await self._summaries.exchange_summary(exchange_id)


def _transcript_entry(message: StoredMessage, limit: int) -> dict[str, Any]:
    record = message.record
    metadata = record.metadata or {}
    entry: dict[str, Any] = {"role": record.role.value, "at": _time(record.created_at)}
    if record.type is MessageType.TOOL_CALL:
        calls = metadata.get("tool_calls", [])
        entry["tool_calls"] = [
            {"name": str(c.get("name", "")), "arguments": _clip(str(c.get("arguments", "")), TOOL_TEXT_CHARS)}
            for c in calls
            if isinstance(c, dict)
        ]
        if record.content:
            entry["content"] = _clip(record.content, limit)
    elif record.type is MessageType.TOOL_RESULT:
        entry["tool"] = metadata.get("name")
        entry["is_error"] = bool(metadata.get("is_error"))
        entry["content"] = _clip(record.content, TOOL_TEXT_CHARS)
    else:
        entry["content"] = _clip(record.content, limit)
    return entry


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return f"{cut}… [{len(text) - len(cut)} more characters]"


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
