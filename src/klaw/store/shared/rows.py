"""Rows ⇄ records for the tables both backends hold alike (`messages`, `exchanges`, `embedding_jobs`,
`memory_chunks`): the columns a query selects and the value built from them. A column added to one of
these tables is mapped here once. Values are converted explicitly (`int`, `str`), since psycopg and
apsw hand back different Python types for the same column."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from klaw.store.archival_records import MemoryChunk
from klaw.store.records import (
    ChatRef,
    EmbeddingJob,
    EmbeddingJobStatus,
    Exchange,
    ExchangeStatus,
    MessageRecord,
    MessageType,
    Role,
    StoredMessage,
    from_millis,
    to_millis,
)
from klaw.store.summaries.log_records import SUMMARY_RECORD_TYPES

Row = tuple[Any, ...]

MESSAGE_COLUMNS = (
    "m.rowid, m.id, m.channel, m.chat_id, m.segment_id, m.role, m.type, m.content, m.metadata, m.created_at"
)
EXCHANGE_COLUMNS = (
    "e.id, c.channel, c.chat_id, e.segment_id, e.started_at, e.status, e.user_message_rowid,"
    " e.final_message_rowid, e.ended_at"
)
JOB_COLUMNS = "id, target, target_rowid, status, attempts, next_attempt_at, last_error, created_at"
CHUNK_COLUMNS = "c.rowid, m.id, m.channel, m.chat_id, c.segment_id, c.content, c.created_at"
CHUNK_FROM = "memory_chunks c JOIN messages m ON m.rowid = c.rowid"
MESSAGE_INSERT_COLUMNS = "id, channel, chat_id, chat, segment_id, role, type, content, metadata, created_at"

_TEXT_ELSEWHERE = (MessageType.MEMORY_SAVED, *SUMMARY_RECORD_TYPES)


# A turn maps a few hundred `messages` rows (window, both search sides, neighbours), so the mapping
# avoids what it would repeat: a chat's `ChatRef` (validated, its id percent-encoded) is made once and
# reused, and roles and types are looked up in dicts rather than through their enums' constructors
# (together half of a row's mapping; docs/decisions/195-context-build-cost.md).
_ROLES = {role.value: role for role in Role}
_TYPES = {kind.value: kind for kind in MessageType}
_CHATS: dict[tuple[str, str], ChatRef] = {}
_CHATS_KEPT = 4096


def chat_ref(channel: str, chat_id: str) -> ChatRef:
    """The chat of a row: made (and validated) once per chat, then the same frozen object."""
    chat = _CHATS.get((channel, chat_id))
    if chat is None:
        if len(_CHATS) >= _CHATS_KEPT:
            _CHATS.clear()
        chat = _CHATS[(channel, chat_id)] = ChatRef(channel, chat_id)
    return chat


# A row's record and message are made by setting their slots, as their dataclasses' `__init__` would
# (frozen: through the slots' own setters), without what `__init__` adds for a record being made: the
# default factories' checks and `__post_init__`'s normalising of the time, which `from_millis` has
# done. A third of the cost of `__init__`: a search maps ~200 rows, 1–2 ms of a read's CPU at 100k
# messages (decision 273). tests/store/test_message_rows.py checks the fields are the dataclasses'.
MESSAGE_RECORD_FIELDS = ("chat", "role", "content", "type", "id", "created_at", "metadata")
STORED_MESSAGE_FIELDS = ("rowid", "segment_id", "record")
_CHAT, _ROLE, _CONTENT, _TYPE, _ID, _CREATED, _METADATA = (
    getattr(MessageRecord, name).__set__ for name in MESSAGE_RECORD_FIELDS
)
_ROWID, _SEGMENT, _RECORD = (getattr(StoredMessage, name).__set__ for name in STORED_MESSAGE_FIELDS)
_new = object.__new__


def message_from_row(row: Row) -> StoredMessage:
    """A `messages` row selected with `MESSAGE_COLUMNS` (alias `m`)."""
    rowid, message_id, channel, chat_id, segment_id, role, type_, content, metadata, created_at = row[:10]
    record = _new(MessageRecord)
    _CHAT(record, chat_ref(channel, chat_id))
    _ROLE(record, _ROLES.get(role) or Role(role))
    _CONTENT(record, content)
    _TYPE(record, _TYPES.get(type_) or MessageType(type_))
    _ID(record, message_id)
    _CREATED(record, from_millis(int(created_at)))
    _METADATA(record, json.loads(metadata) if metadata else None)
    message = _new(StoredMessage)
    _ROWID(message, int(rowid))
    _SEGMENT(message, int(segment_id))
    _RECORD(message, record)
    return message


def exchange_from_row(row: Row) -> Exchange:
    """An `exchanges` row selected with `EXCHANGE_COLUMNS` (aliases `e` and `c` for chats)."""
    return Exchange(
        id=int(row[0]),
        chat=ChatRef(row[1], row[2]),
        segment_id=int(row[3]),
        started_at=from_millis(int(row[4])),
        status=ExchangeStatus(row[5]),
        user_message_rowid=None if row[6] is None else int(row[6]),
        final_message_rowid=None if row[7] is None else int(row[7]),
        ended_at=None if row[8] is None else from_millis(int(row[8])),
    )


def job_from_row(row: Row) -> EmbeddingJob:
    """An `embedding_jobs` row selected with `JOB_COLUMNS`."""
    job_id, target, target_rowid, status, attempts, next_attempt_at, last_error, created_at = row
    return EmbeddingJob(
        id=int(job_id),
        target=str(target),
        target_rowid=int(target_rowid),
        status=EmbeddingJobStatus(status),
        attempts=int(attempts),
        next_attempt_at=from_millis(int(next_attempt_at)),
        last_error=last_error,
        created_at=from_millis(int(created_at)),
    )


def chunk_from_row(row: Row) -> MemoryChunk:
    """A saved memory selected with `CHUNK_COLUMNS` from `CHUNK_FROM`."""
    rowid, record_id, channel, chat_id, segment_id, content, created_at = row[:7]
    chat = ChatRef(channel, chat_id)
    return MemoryChunk(int(rowid), str(record_id), chat, int(segment_id), str(content), from_millis(int(created_at)))


def stored_content(record: MessageRecord) -> str:
    """What `messages.content` keeps of a record: a saved memory's text lives in `memory_chunks` only,
    a summary's in `summaries`, so neither is stored twice nor matched as a message by full-text search."""
    return "" if record.type in _TEXT_ELSEWHERE else record.content


def message_values(
    record: MessageRecord, chat_key: int, segment_id: int, clean: Callable[[str], str] = str
) -> tuple[Any, ...]:
    """The values of a `messages` INSERT in the order of `MESSAGE_INSERT_COLUMNS`; `clean` is the
    backend's rule for text it cannot hold (PostgreSQL refuses NUL), applied to content and metadata."""
    metadata = None if record.metadata is None else clean(json.dumps(record.metadata, ensure_ascii=False))
    return (
        record.id,
        record.chat.channel,
        record.chat.chat_id,
        chat_key,
        segment_id,
        record.role.value,
        record.type.value,
        clean(stored_content(record)),
        metadata,
        to_millis(record.created_at),
    )


def embed_flags(records: Sequence[MessageRecord], embed: Sequence[bool] | None) -> list[bool]:
    """`append_many`'s flags, one a record (none: nothing embedded); a caller's count mismatch is a bug."""
    flags = [False] * len(records) if embed is None else list(embed)
    if len(flags) != len(records):
        raise ValueError(f"embed has {len(flags)} flags for {len(records)} records")
    return flags
