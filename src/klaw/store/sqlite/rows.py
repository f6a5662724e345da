"""Mapping between `messages` rows and `StoredMessage`, shared by every SQLite repository."""

from __future__ import annotations

import json
from typing import Any

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, StoredMessage, from_millis

MESSAGE_COLUMNS = (
    "m.rowid, m.id, m.channel, m.chat_id, m.segment_id, m.role, m.type, m.content, m.metadata, m.created_at"
)


def message_from_row(row: tuple[Any, ...]) -> StoredMessage:
    rowid, message_id, channel, chat_id, segment_id, role, type_, content, metadata, created_at = row[:10]
    record = MessageRecord(
        chat=ChatRef(channel, chat_id),
        role=Role(role),
        type=MessageType(type_),
        content=content,
        id=message_id,
        created_at=from_millis(created_at),
        metadata=json.loads(metadata) if metadata else None,
    )
    return StoredMessage(rowid=rowid, segment_id=segment_id, record=record)
