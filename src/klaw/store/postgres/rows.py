"""`messages` rows ⇄ `StoredMessage`, and the record-kind conditions, shared by the PostgreSQL repositories."""

from __future__ import annotations

import json

from klaw.store.postgres.connection import Row
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, StoredMessage, from_millis

# The conditions on a `messages` row are plain SQL, shared with SQLite (a test checks them against
# `MessageRecord.kind` there).
from klaw.store.sqlite.record_kinds import control_sql, conversation_sql, not_control_sql, user_message_sql

__all__ = [
    "MESSAGE_COLUMNS",
    "control_sql",
    "conversation_sql",
    "message_from_row",
    "not_control_sql",
    "user_message_sql",
]

MESSAGE_COLUMNS = (
    "m.rowid, m.id, m.channel, m.chat_id, m.segment_id, m.role, m.type, m.content, m.metadata, m.created_at"
)


def message_from_row(row: Row) -> StoredMessage:
    rowid, message_id, channel, chat_id, segment_id, role, type_, content, metadata, created_at = row[:10]
    record = MessageRecord(
        chat=ChatRef(channel, chat_id),
        role=Role(role),
        type=MessageType(type_),
        content=content,
        id=message_id,
        created_at=from_millis(int(created_at)),
        metadata=json.loads(metadata) if metadata else None,
    )
    return StoredMessage(rowid=int(rowid), segment_id=int(segment_id), record=record)
