"""Read-only answers for the web inspector, asked over the engine socket (`query` → `result`).

The engine stays the only process that opens klaw.db (docs/decisions/002-engine-owns-the-database.md): a
gateway in another process asks here instead of reading the database itself, and memory search runs with
the engine's own embedder (no second copy of the model in the gateway). Every answer is bounded (so it
fits one 1 MiB frame) and JSON-ready; message text is cut to `TEXT_CHARS`. Bad parameters raise
`QueryError` with a sentence for the person; nothing here writes. Queries that act are added by the
engine's start (`extra`): `forget` (`klaw memory forget` beside the engine), `memory_tool` (`klaw mcp
serve`), `cancel_turn` (`{"channel", "chat_id"}` → `{"cancelled": bool}`: Ctrl-C in an attached `klaw chat`
stops that chat's turn, engine/turn_cancel.py, decision 496), `nobody_can_answer` (`{"channel", "chat_id",
"id"}` → `{"ended": bool, "said"}`: a piped attached `klaw chat` ends its question unrun, decision 516), `piped`
(`{"channel", "chat_id"}` → `{"noted": true}`: once that connection closes, its chat's new questions end unrun, 521),
`status` (`klaw status`, 510), `schedule` (`{"action", "name"}`: `klaw schedule remove|add|run` beside the engine,
engine/schedule_query.py, 526), `running_tool` (`{"channel", "chat_id"}` → `{"tool", "seconds", "limit_seconds",
"limit_words"}`: an attached terminal's spinner names the tool under way, 527).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from klaw.ascii_digits import digits
from klaw.engine.approval import ApprovalGate
from klaw.engine.context_history import ContextHistory
from klaw.engine.frame_dispatch import QueryError
from klaw.engine.frames import QueryFrame, unasked_label
from klaw.engine.history_tools import answered_up_to, history_tools, unanswered_turns
from klaw.engine.memory_settings import MemorySettings
from klaw.memory.hybrid_search import HybridSearch
from klaw.store.protocol import Storage
from klaw.store.records import MAX_ROW_ID, ChatRef, Exchange, Role, StoredMessage

TEXT_CHARS = 2000
MAX_SEGMENTS = 100
MAX_MESSAGES = 200
MAX_HITS = 50
HISTORY_MESSAGES = 50
HISTORY_TEXT_CHARS = 20_000
HISTORY_BYTES = 768 * 1024
"""What `history` returns at most, in JSON bytes counted as if every character were escaped: a safe
bound under the 1 MiB frame whatever the text."""

Answer = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


class EngineQueries:
    def __init__(
        self,
        store: Storage,
        history: ContextHistory,
        search: HybridSearch,
        settings: MemorySettings | None = None,
        extra: Mapping[str, Answer] | None = None,
        approvals: ApprovalGate | None = None,
    ) -> None:
        """`extra`: more answers by query name (`memory_tool`: engine/memory_access.py)."""
        self._store = store
        self._history = history
        self._search = search
        self._settings = settings
        self._approvals = approvals
        self._answers: dict[str, Answer] = {
            "chats": self._chats,
            "turns": self._turns,
            "segments": self._segments,
            "segment": self._segment,
            "search": self._search_memory,
            "history": self._chat_history,
            "settings": self._overrides,
            "approvals": self._approvals_waiting,
            "approval_over": self._approval_over,
            "sent": self._sent,
            **(extra or {}),
        }

    async def answer(self, frame: QueryFrame) -> dict[str, Any]:
        handler = self._answers.get(frame.query)
        if handler is None:
            raise QueryError(f"unknown query; known: {', '.join(sorted(self._answers))}")
        return await handler(frame.params)

    async def _chats(self, _: Mapping[str, Any]) -> dict[str, Any]:
        chats = list(dict.fromkeys([*self._history.chats(), *await self._store.segments.chats()]))
        return {"chats": [{"channel": chat.channel, "chat_id": chat.chat_id} for chat in chats]}

    async def _turns(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {"turns": [turn.to_json() for turn in self._history.turns(_chat(params))]}

    async def _segments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        segments = await self._store.segments.list(_chat(params))
        rows = []
        for number, segment in reversed(list(enumerate(segments, start=1))[-MAX_SEGMENTS:]):  # newest first
            rows.append(
                {
                    "id": segment.id,
                    "number": number,  # the chat's own count (1, 2, …): ids run across all chats
                    "started_at": segment.started_at.isoformat(),
                    "ended_at": segment.ended_at.isoformat() if segment.ended_at else None,
                    "messages": await self._store.messages.count_in_segment(segment.id),
                }
            )
        return {"segments": rows}

    async def _segment_numbers(self, chat: ChatRef) -> dict[int, int]:
        """Each segment id of `chat` and its number within the chat, 1 for its first (decision 275)."""
        return {segment.id: number for number, segment in enumerate(await self._store.segments.list(chat), start=1)}

    async def _segment(self, params: Mapping[str, Any]) -> dict[str, Any]:
        segment_id = _int(params, "segment_id", low=1)
        segment = await self._store.segments.get(segment_id)
        if segment is None:
            raise QueryError(f"there is no segment {segment_id}")
        messages = await self._store.messages.window(segment_id, _int(params, "limit", MAX_MESSAGES, 1, MAX_MESSAGES))
        exchanges = await self._store.exchanges.for_segment(segment_id)
        linked = [r for e in exchanges for r in (e.user_message_rowid, e.final_message_rowid) if r is not None]
        by_rowid = {m.rowid: m for m in await self._store.messages.by_rowids(linked)} if linked else {}
        return {
            "segment": {
                "id": segment.id,
                "number": (await self._segment_numbers(segment.chat)).get(segment.id),
                "channel": segment.chat.channel,
                "chat_id": segment.chat.chat_id,
                "started_at": segment.started_at.isoformat(),
                "ended_at": segment.ended_at.isoformat() if segment.ended_at else None,
                "messages": await self._store.messages.count_in_segment(segment_id),
            },
            "messages": [_message(m) for m in messages],
            "exchanges": [_exchange(e, by_rowid) for e in exchanges[-MAX_MESSAGES:]],
            "summaries": [],  # filled once segment and exchange summaries exist (cross-conversation memory)
        }

    async def _search_memory(self, params: Mapping[str, Any]) -> dict[str, Any]:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise QueryError("type something to search for")
        segment = params.get("segment_id")
        segment_id = None if segment in (None, "") else _int(params, "segment_id", low=1)
        chat = _chat(params)
        hits = await self._search.look(chat, text, segment_id=segment_id, limit=_int(params, "limit", 10, 1, MAX_HITS))
        numbers = await self._segment_numbers(chat) if hits else {}
        return {
            "hits": [
                {
                    **_message(hit.message),
                    "segment_number": numbers.get(hit.message.segment_id),
                    "score": hit.score,
                    "distance": hit.distance,
                    "fts_rank": hit.fts_rank,
                    "bm25": hit.bm25,
                }
                for hit in hits
            ]
        }

    async def _chat_history(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The chat as its person saw it, oldest first: their messages and the agent's replies (text
        only: no tool results), newest segments back to the `limit`, for a page that opens or reloads.
        Each message says its segment, so a page can show where `/new` started a fresh one, a scheduled
        task's answer names its task, a message written in another chat that chat (`sent_from`), and a
        reply names its turn's tool calls (`tools`, bounded as the reply frame carried them:
        tools_used.tool_runs), counted in the bytes like the rest."""
        limit = _int(params, "limit", HISTORY_MESSAGES, 1, MAX_MESSAGES)
        picked: list[dict[str, Any]] = []
        budget = HISTORY_BYTES
        for segment in reversed(await self._store.segments.list(_chat(params))):
            window = await self._store.messages.window(segment.id, MAX_MESSAGES)
            exchanges = await self._store.exchanges.for_segment(segment.id)
            tools = history_tools(window, await unanswered_turns(self._store, exchanges))
            answered = answered_up_to(exchanges)
            for index in reversed(range(len(window))):
                message = window[index]
                record = message.record
                if not record.kind.is_conversation:
                    continue
                entry = _message(message, HISTORY_TEXT_CHARS)
                metadata = record.metadata or {}
                task = metadata.get("task") if metadata.get("source") == "task" else None
                sent_from = metadata.get("from") if metadata.get("source") == "message_send" else None
                entry["task"] = task
                entry["sent_from"] = sent_from
                entry["task_label"] = unasked_label(task, metadata.get("origin") == "spawn", sent_from)
                if record.role is Role.ASSISTANT:
                    entry["tools"] = list(tools.replies.get(index, ()))
                else:  # a reload marks it answered as the live reply did (its `answers`: decision 505)
                    entry["answered"] = message.rowid <= answered
                    if message.rowid in tools.unanswered:  # its turn called these, then failed: no reply has them
                        entry["tools"] = list(tools.unanswered[message.rowid])
                        entry["turn_failed"] = True
                budget -= len(json.dumps(entry))
                if budget < 0 or len(picked) == limit:
                    return {"messages": picked[::-1], "complete": False}
                picked.append(entry)
        return {"messages": picked[::-1], "complete": True}

    async def _approvals_waiting(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The approval questions waiting in a chat, as asked (approval.py `questions`)."""
        chat = _chat(params)
        return {"approvals": self._approvals.questions(chat) if self._approvals is not None else []}

    async def _approval_over(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`over`: None while the question `id` of the chat waits, else how it ended, for a prompt that did not
        answer it (an attached `klaw chat`'s y/N, decision 450: approval.py `over`)."""
        chat, request_id = _chat(params), params.get("id")
        if not isinstance(request_id, str) or not request_id:
            raise QueryError("name the question: id")
        return {"over": self._approvals.over(chat, request_id) if self._approvals is not None else None}

    async def _sent(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A message a channel sent under its own id (the web page's `client_id`), asked before sending it
        again: whether the chat holds it, whether its text is the one sent now (`sha256` of the UTF-8), and
        the reply its exchange ended with, if any (decision 487). The engine keeps one message per id, so a
        re-send after a lost response has nothing new to answer, and another text under the id is dropped."""
        chat, message_id, digest = _chat(params), params.get("id"), params.get("sha256")
        if not isinstance(message_id, str) or not message_id or not isinstance(digest, str):
            raise QueryError("name the message: id and sha256")
        found = await self._store.messages.get(message_id)
        if found is None or found.record.chat != chat or found.role is not Role.USER or not found.is_conversation:
            return {"stored": False}  # a command's record (`/new`) keeps its own replay (decision 486)
        text = found.content.encode("utf-8", "surrogatepass")
        if hashlib.sha256(text).hexdigest() != digest:
            return {"stored": True, "same_text": False, "reply": None}
        return {"stored": True, "same_text": True, "reply": await self._reply_to(found)}

    async def _reply_to(self, message: StoredMessage) -> dict[str, Any] | None:
        """The final reply of the exchange that took `message` (the one opened at it or at an earlier
        message of its burst), cut to HISTORY_TEXT_CHARS; None while it runs, or when it ended without one."""
        opened = [
            e
            for e in await self._store.exchanges.for_segment(message.segment_id)
            if e.user_message_rowid is not None and e.user_message_rowid <= message.rowid
        ]
        last = max(opened, key=lambda e: e.user_message_rowid or 0, default=None)
        if last is None or last.final_message_rowid is None or last.final_message_rowid < message.rowid:
            return None
        replies = await self._store.messages.by_rowids([last.final_message_rowid])
        if not replies or replies[0].role is not Role.ASSISTANT:
            return None
        text = replies[0].content
        return {"text": text[:HISTORY_TEXT_CHARS], "truncated": len(text) > HISTORY_TEXT_CHARS}

    async def _overrides(self, _: Mapping[str, Any]) -> dict[str, Any]:
        """The settings `/summarizer`, `/embeddings` and `/rag` override, with their values in force: a
        gateway's settings view knows engine.yaml only, and these live in the engine's database."""
        rows = self._settings.overrides() if self._settings is not None else []
        return {"overrides": [{"field": field, "value": value, "command": command} for field, value, command in rows]}


def named_chat(params: Mapping[str, Any]) -> ChatRef:
    """The chat a query names by `channel` and `chat_id`, else a `QueryError` saying so."""
    channel, chat_id = params.get("channel"), params.get("chat_id")
    if not isinstance(channel, str) or not isinstance(chat_id, str):
        raise QueryError("name the chat: channel and chat_id")
    try:
        return ChatRef(channel, chat_id)
    except ValueError as exc:
        raise QueryError(str(exc)) from None


_chat = named_chat


def _int(params: Mapping[str, Any], key: str, default: int | None = None, low: int = 0, high: int = MAX_ROW_ID) -> int:
    value = params.get(key, default)
    if isinstance(value, str) and digits(value.strip(), len(str(high))):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise QueryError(f"{key} must be a whole number from {low} to {high}")
    return value


def _message(message: StoredMessage, chars: int = TEXT_CHARS) -> dict[str, Any]:
    record = message.record
    return {
        "rowid": message.rowid,
        "id": record.id,
        "segment_id": message.segment_id,
        "role": record.role.value,
        "type": record.type.value,
        "created_at": record.created_at.isoformat(),
        "text": record.content[:chars],
        "truncated": len(record.content) > chars,
    }


def _exchange(exchange: Exchange, messages: Mapping[int, StoredMessage]) -> dict[str, Any]:
    def text(rowid: int | None) -> str | None:
        found = messages.get(rowid) if rowid is not None else None
        return found.content[:TEXT_CHARS] if found is not None else None

    return {
        "id": exchange.id,
        "status": exchange.status.value,
        "started_at": exchange.started_at.isoformat(),
        "ended_at": exchange.ended_at.isoformat() if exchange.ended_at else None,
        "user_text": text(exchange.user_message_rowid),
        "reply_text": text(exchange.final_message_rowid),
    }
