"""`exchanges` folded from the log's `exchange_open` / `exchange_close` records, as they are appended.

Called by `SqliteMessages.append_in` inside the append's transaction, exactly like `session_break`
closes a segment: live ingestion and `klaw reindex` therefore build the same rows. A close finds
its exchange by what the open record says (chat, start time, user message), which needs no extra
column and is the same in any database built from the same log.

Exchange ids are stable (migration 0007, docs/decisions/100-stable-exchange-ids.md): an open record
carrying its id (`"exchange"`, reserved by `reserve_exchange_id` before it was logged) is inserted
under that id; one of an older log, without it, gets the next id after the high-water mark, as
`INTEGER PRIMARY KEY` gave before. Every id inserted raises the mark, and so does the mark a
`forget` tombstone remembers (`raise_exchange_mark`), so no id is ever handed out twice, even by a
database rebuilt from a log whose forgotten exchanges left no record.

A close naming its final reply notes that reply in `undelivered_replies` (migration 0008) in the same
transaction: it is delivered after the close is logged, so a crash in between leaves the row, and
the engine sends the reply again at start (docs/decisions/101-reply-redelivery.md).
"""

from __future__ import annotations

import logging

import apsw

from klaw.store.exchange_records import (
    NO_EXCHANGE,
    OPENING_SQL,
    ExchangeClose,
    Opening,
    opened_exchange_id,
    opened_user_message_id,
    sent_unasked,
)
from klaw.store.records import ExchangeStatus, MessageRecord, MessageType
from klaw.store.sqlite.query import fetch_one, fetch_value

log = logging.getLogger(__name__)


def fold_exchange_record(
    connection: apsw.Connection, record: MessageRecord, chat_key: int, segment_id: int, rowid: int, created_at: int
) -> None:
    """Open or close an exchange for an exchange control record; keep a message the agent sent unasked
    (a task's answer) to deliver, as a close keeps its reply (no-op for other records)."""
    if sent_unasked(record):
        connection.execute(
            "INSERT OR IGNORE INTO undelivered_replies (message_rowid, exchange_id) VALUES (?, ?)", (rowid, NO_EXCHANGE)
        )
    elif record.type is MessageType.EXCHANGE_OPEN:
        user_rowid = rowid_of(connection, opened_user_message_id(record))
        insert_exchange(connection, opened_exchange_id(record.metadata), chat_key, segment_id, created_at, user_rowid)
    elif record.type is MessageType.EXCHANGE_CLOSE:
        _close(connection, record, chat_key, created_at)


def insert_exchange(
    connection: apsw.Connection,
    exchange_id: int | None,
    chat_key: int,
    segment_id: int,
    started_at: int,
    user_rowid: int | None,
) -> int:
    """Insert an open exchange under `exchange_id` (None, or an id already taken: the next one after
    the high-water mark) and raise the mark to it; returns the id used."""
    if exchange_id is not None and fetch_value(connection, "SELECT 1 FROM exchanges WHERE id = ?", (exchange_id,)):
        log.warning("exchange_open names exchange %d, which is already stored; numbered anew", exchange_id)
        exchange_id = None
    if exchange_id is None:
        exchange_id = _high(connection) + 1
    connection.execute(
        "INSERT INTO exchanges (id, chat, segment_id, started_at, status, user_message_rowid)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (exchange_id, chat_key, segment_id, started_at, ExchangeStatus.OPEN.value, user_rowid),
    )
    raise_exchange_mark(connection, exchange_id)
    return exchange_id


def reserve_exchange_id(connection: apsw.Connection) -> int:
    """The next exchange id, taken from the high-water mark at once (inside a transaction): two turns
    opening exchanges together get different ids; an id reserved and never logged is just skipped."""
    high = _high(connection) + 1
    raise_exchange_mark(connection, high)
    return high


def exchange_mark(connection: apsw.Connection) -> int:
    """The highest exchange id ever given out or reserved (a `forget` tombstone remembers it)."""
    return _high(connection)


def raise_exchange_mark(connection: apsw.Connection, exchange_id: int) -> None:
    connection.execute(
        "INSERT INTO id_marks (name, high) VALUES ('exchange', ?)"
        " ON CONFLICT (name) DO UPDATE SET high = max(high, excluded.high)",
        (exchange_id,),
    )


def _high(connection: apsw.Connection) -> int:
    value = fetch_value(connection, "SELECT high FROM id_marks WHERE name = 'exchange'")
    stored = fetch_value(connection, "SELECT max(id) FROM exchanges")
    return max(int(value or 0), int(stored or 0))


def _close(connection: apsw.Connection, record: MessageRecord, chat_key: int, ended_at: int) -> None:
    close = ExchangeClose.from_record(record)
    if close is None:
        log.warning("exchange_close record %s has no usable status or opening record; ignored", record.id)
        return
    opened = opening(connection, chat_key, close.opened)
    if opened is None:
        log.warning("exchange_close record %s names an opening record that is not stored; ignored", record.id)
        return
    row = fetch_one(
        connection,
        "SELECT id FROM exchanges WHERE chat = ? AND started_at = ? AND user_message_rowid IS ? AND status = ?"
        " ORDER BY id = ? DESC, id DESC LIMIT 1",
        (
            chat_key,
            opened.started_at,
            rowid_of(connection, opened.user_message_id),
            ExchangeStatus.OPEN.value,
            opened.exchange_id,
        ),
    )
    if row is None:
        log.warning("exchange_close record %s found no open exchange; ignored", record.id)
        return
    final_rowid = rowid_of(connection, close.final_message_id)
    connection.execute(
        "UPDATE exchanges SET status = ?, final_message_rowid = ?, ended_at = ? WHERE id = ?",
        (close.status.value, final_rowid, ended_at, row[0]),
    )
    if final_rowid is not None:  # to deliver, until a channel confirms it (migration 0008)
        connection.execute(
            "INSERT OR IGNORE INTO undelivered_replies (message_rowid, exchange_id) VALUES (?, ?)",
            (final_rowid, row[0]),
        )


def opening(connection: apsw.Connection, chat_key: int, open_id: str) -> Opening | None:
    """The chat's `exchange_open` record `open_id`, None when it is not stored."""
    row = fetch_one(connection, OPENING_SQL, (open_id, chat_key, MessageType.EXCHANGE_OPEN.value))
    return None if row is None else Opening.from_row(row)


def rowid_of(connection: apsw.Connection, message_id: object) -> int | None:
    if not isinstance(message_id, str):
        return None
    row = fetch_one(connection, "SELECT rowid FROM messages WHERE id = ?", (message_id,))
    return None if row is None else int(row[0])
