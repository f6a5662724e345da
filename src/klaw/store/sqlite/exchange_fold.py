"""`exchanges` folded from the log's `exchange_open` / `exchange_close` records, as they are appended.

Called by `SqliteMessages.append_in` inside the append's transaction, exactly like `session_break`
closes a segment: live ingestion and `klaw reindex` therefore build the same rows. A close finds
its exchange by what the open record says (chat, start time, user message), which needs no extra
column and is the same in any database built from the same log.
"""

from __future__ import annotations

import json
import logging

import apsw

from klaw.store.exchange_records import ExchangeClose, opened_user_message_id
from klaw.store.records import ExchangeStatus, MessageRecord, MessageType
from klaw.store.sqlite.query import fetch_one

log = logging.getLogger(__name__)


def fold_exchange_record(
    connection: apsw.Connection, record: MessageRecord, chat_key: int, segment_id: int, created_at: int
) -> None:
    """Open or close an exchange for an exchange control record (no-op for other types)."""
    if record.type is MessageType.EXCHANGE_OPEN:
        user_rowid = _rowid(connection, opened_user_message_id(record))
        connection.execute(
            "INSERT INTO exchanges (chat, segment_id, started_at, status, user_message_rowid) VALUES (?, ?, ?, ?, ?)",
            (chat_key, segment_id, created_at, ExchangeStatus.OPEN.value, user_rowid),
        )
    elif record.type is MessageType.EXCHANGE_CLOSE:
        _close(connection, record, chat_key, created_at)


def _close(connection: apsw.Connection, record: MessageRecord, chat_key: int, ended_at: int) -> None:
    close = ExchangeClose.from_record(record)
    if close is None:
        log.warning("exchange_close record %s has no usable status or opening record; ignored", record.id)
        return
    opened = fetch_one(
        connection,
        "SELECT created_at, metadata FROM messages WHERE id = ? AND chat = ? AND type = ?",
        (close.opened, chat_key, MessageType.EXCHANGE_OPEN.value),
    )
    if opened is None:
        log.warning("exchange_close record %s names an opening record that is not stored; ignored", record.id)
        return
    metadata = json.loads(opened[1]) if opened[1] else {}
    user_rowid = _rowid(connection, metadata.get("user_message_id") if isinstance(metadata, dict) else None)
    row = fetch_one(
        connection,
        "SELECT id FROM exchanges WHERE chat = ? AND started_at = ? AND user_message_rowid IS ? AND status = ?"
        " ORDER BY id DESC LIMIT 1",
        (chat_key, opened[0], user_rowid, ExchangeStatus.OPEN.value),
    )
    if row is None:
        log.warning("exchange_close record %s found no open exchange; ignored", record.id)
        return
    connection.execute(
        "UPDATE exchanges SET status = ?, final_message_rowid = ?, ended_at = ? WHERE id = ?",
        (close.status.value, _rowid(connection, close.final_message_id), ended_at, row[0]),
    )


def _rowid(connection: apsw.Connection, message_id: object) -> int | None:
    if not isinstance(message_id, str):
        return None
    row = fetch_one(connection, "SELECT rowid FROM messages WHERE id = ?", (message_id,))
    return None if row is None else int(row[0])
