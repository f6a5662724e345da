"""Reading a chat as a person could: its sessions, the current session's messages and turns, its memory.

For programs using klaw as a library (`Klaw.history`, `Klaw.turns`, …; docs/library.md) and for tests
that assert what a person could observe, so neither reaches into the storage repositories. Built on
the storage protocol only (either backend), and read-only: nothing here creates a session or writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from klaw.engine.transcript import record_to_chat_message
from klaw.llm.messages import ToolCall
from klaw.memory.archival_memory import ArchivalError
from klaw.memory.chunk_search import ChunkSearch
from klaw.memory.core_memory import CoreMemory
from klaw.memory.hybrid_search import CANDIDATES_PER_SIDE, HybridSearch
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageType, RecordKind, StoredMessage

DEFAULT_LIMIT = 100


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message of a chat's conversation. `type` says what it is: `text` (what was said), `tool_call`
    and `tool_result` (the agent's tool use), or another conversation record (`memory_saved`, a summary).
    Records of the chat's state (a `/new`, a turn's start and end) are not history: see `TurnState`."""

    id: str
    role: str  # user, assistant, tool, system
    text: str  # empty for a `tool_call` the model made without words: `tool_calls` says what it asked
    type: str
    created_at: datetime
    session: int  # the session (the part of the chat since a `/new`) it belongs to
    tool_calls: tuple[ToolCall, ...] = ()  # a `tool_call`: each tool asked for, with its JSON arguments
    tool: str | None = None  # a `tool_result`: the tool that answered (`text` is its answer)


@dataclass(frozen=True, slots=True)
class TurnState:
    """One turn of a chat: a person's message and everything up to the agent's final reply."""

    id: int
    status: Literal["open", "completed", "failed", "tool_limit", "interrupted"]
    started_at: datetime
    ended_at: datetime | None
    message: str | None  # the id of the person's message it answers (None: a task's run, a resumed turn)
    reply: str | None  # the id of the agent's final reply, once there is one


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """The part of a chat between two `/new`s; the last one of a chat is its current session."""

    id: int
    started_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True, slots=True)
class MemoryFound:
    """An earlier message (`search_memory`) or a saved memory (`saved_memories`) of the chat that a
    search found, best first. A message's `score`, `distance` (cosine, lower is closer; None: not found
    by meaning) and `fts_rank` (1-based; None: not found by words) are the ones `klaw memory search`
    prints; a row with neither is there as the neighbour of a hit. A saved memory's `score` is the
    reciprocal-rank fusion of its two ranks: it orders, it does not measure."""

    kind: Literal["memory", "message"]
    text: str
    created_at: datetime
    score: float
    # a message's id, the one `history` gives it (`HistoryEntry.id`, `TurnState.message`/`reply`): a hit is found
    # in the chat's history by it (its database rowid before, which nothing else names: decision 538); or a saved
    # memory's id, like 3f9a1c2e (`/forget memory <id>`)
    id: str
    session: int
    distance: float | None
    fts_rank: int | None


class ChatReader:
    """What a person could see of each chat, read through the storage protocol."""

    def __init__(self, store: Storage, messages: HybridSearch, memories: ChunkSearch, core: CoreMemory) -> None:
        self._store = store
        self._messages = messages
        self._memories = memories
        self._core = core

    async def sessions(self, chat: ChatRef) -> list[SessionInfo]:
        """The chat's sessions, oldest first; empty for a chat that never had a message."""
        return [SessionInfo(s.id, s.started_at, s.ended_at) for s in await self._store.segments.list(chat)]

    async def history(
        self, chat: ChatRef, *, limit: int = DEFAULT_LIMIT, session: int | None = None
    ) -> list[HistoryEntry]:
        """The last `limit` messages of the chat's current session (or of `session`, one of its
        `sessions`), oldest first, each with its type."""
        segment = await self._session(chat, session)
        if segment is None:
            return []
        return [_history_entry(m) for m in await self._store.messages.window(segment, limit)]

    async def turns(self, chat: ChatRef, *, session: int | None = None) -> list[TurnState]:
        """The turns of the chat's current session (or of `session`), oldest first, each with how it
        ended (or `open`)."""
        segment = await self._session(chat, session)
        if segment is None:
            return []
        exchanges = await self._store.exchanges.for_segment(segment)
        linked = [r for e in exchanges for r in (e.user_message_rowid, e.final_message_rowid) if r is not None]
        ids = {m.rowid: m.record.id for m in await self._store.messages.by_rowids(linked)} if linked else {}
        return [
            TurnState(
                e.id,
                e.status.value,
                e.started_at,
                e.ended_at,
                None if e.user_message_rowid is None else ids.get(e.user_message_rowid),
                None if e.final_message_rowid is None else ids.get(e.final_message_rowid),
            )
            for e in exchanges
        ]

    async def search_memory(
        self, chat: ChatRef, query: str, *, limit: int = 5, session: int | None = None
    ) -> list[MemoryFound]:
        """The chat's earlier messages (all sessions, or `session`) that best match `query`: the engine's
        `HybridSearch` asked exactly as `klaw memory search` asks it (the same candidates, no relevance
        gate), so a program sees the hits and scores a person sees on the command line. Raises
        ArchivalError for an empty query."""
        _check(query)
        if session is not None and await self._session(chat, session) is None:
            return []
        hits = await self._messages.look(chat, query, segment_id=session, limit=limit)
        return [
            MemoryFound(
                "message",
                h.message.content,
                h.message.record.created_at,
                h.score,
                h.message.record.id,
                h.message.segment_id,
                h.distance,
                h.fts_rank,
            )
            for h in hits
        ]

    async def saved_memories(self, chat: ChatRef, query: str, *, limit: int = 5) -> list[MemoryFound]:
        """The chat's saved memories (`memory_save`) that best match `query`, by meaning and words."""
        _check(query)
        hits = await self._memories.search(chat, query, limit=max(limit, CANDIDATES_PER_SIDE))
        return [
            MemoryFound(
                "memory",
                h.chunk.content,
                h.chunk.created_at,
                h.score,
                h.chunk.memory_id,
                h.chunk.segment_id,
                h.distance,
                h.fts_rank,
            )
            for h in hits[:limit]
        ]

    async def core_memory(self) -> dict[str, Any]:
        """Core memory: the facts kept in every context (one for all chats)."""
        return await self._core.read()

    async def _session(self, chat: ChatRef, session: int | None) -> int | None:
        """The id of the chat's `session`, or of its current one; None when the chat has no such session."""
        ids = [segment.id for segment in await self._store.segments.list(chat)]
        if session is None:
            return ids[-1] if ids else None
        return session if session in ids else None


def _check(query: str) -> None:
    if not query.strip():
        raise ArchivalError("the query is empty: say what to look for")


def _history_entry(message: StoredMessage) -> HistoryEntry:
    """A stored message as the library shows it; a tool step read the way a model is shown it."""
    record = message.record
    seen = record_to_chat_message(record) if record.kind is RecordKind.TOOL_STEP else None
    return HistoryEntry(
        record.id,
        record.role.value,
        record.content,
        record.type.value,
        record.created_at,
        message.segment_id,
        tool_calls=seen.tool_calls if seen is not None else (),
        tool=seen.name if seen is not None and record.type is MessageType.TOOL_RESULT else None,
    )
