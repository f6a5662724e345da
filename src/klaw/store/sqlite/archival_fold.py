"""`memory_saved` and `forget` records folded into the database as they are appended.

Called by `SqliteMessages.append_in` inside the append's transaction, like the exchange fold: live
ingestion, crash recovery and `klaw reindex` therefore do the same thing with the same records.

- `memory_saved`: a `memory_chunks` row sharing the record's rowid, with its embedding job (target
  `memory`) in the same transaction. The messages row keeps no text (`shared/rows.py` `stored_content`).
- `forget`: the exchange high-water mark raised to the one the tombstone remembers, and every row
  derived from the named records of the chat is deleted: messages (their FTS
  rows by trigger), vectors, embedding jobs, memory chunks, the exchanges they make up and the
  summaries that could quote them (those of every exchange holding a forgotten record, and their
  segments' summaries). The connection runs with `PRAGMA secure_delete` (connection.py), which
  zeroes freed space, and the FTS tables use FTS5 secure-delete (migration 0003) or, for the open
  segments' last messages, are rebuilt (migration 0013), so no copy of the text stays in the file;
  the WAL still holds old pages until `checkpoint_truncate` (the forgetting
  service calls it after the commit).
"""

from __future__ import annotations

import json
from collections.abc import Collection

import apsw

from klaw.store.archival_records import forgotten_ids, remembered_exchange_high
from klaw.store.records import (
    MEMORY_TARGET,
    MESSAGE_TARGET,
    EmbeddingJobStatus,
    MessageRecord,
    MessageType,
    RecordKind,
    Role,
    record_kind,
)
from klaw.store.shared.statements import ENQUEUE_JOB
from klaw.store.sqlite.exchange_fold import raise_exchange_mark
from klaw.store.sqlite.memory_chunks import MEMORY_VECTORS
from klaw.store.sqlite.query import Row, fetch_all, fetch_value
from klaw.store.sqlite.vector_tables import table_exists
from klaw.store.sqlite.vectors import MESSAGE_VECTORS
from klaw.store.summaries.log_records import SUMMARY_RECORD_TYPES
from klaw.store.summaries.records import SUMMARY_TARGET
from klaw.store.summaries.sqlite.fold import summary_record_rowids
from klaw.store.summaries.sqlite.repository import delete_summaries_in

_SUMMARY_TYPES = {t.value for t in SUMMARY_RECORD_TYPES}


def fold_archival_record(
    connection: apsw.Connection,
    record: MessageRecord,
    chat_key: int,
    segment_id: int,
    rowid: int,
    created_at: int,
    now_millis: int,
) -> bool:
    """Fold a `memory_saved` or `forget` record (no-op for other types). True when rows were
    forgotten: the caller drops its in-memory vector copies of the chat."""
    if record.type is MessageType.MEMORY_SAVED:
        connection.execute(
            "INSERT INTO memory_chunks (rowid, chat, segment_id, content, created_at) VALUES (?, ?, ?, ?, ?)",
            (rowid, chat_key, segment_id, record.content, created_at),
        )
        connection.execute(
            ENQUEUE_JOB, (MEMORY_TARGET, rowid, EmbeddingJobStatus.PENDING.value, now_millis, now_millis)
        )
        return False
    if record.type is MessageType.FORGET:
        high = remembered_exchange_high(record)
        if high is not None:
            raise_exchange_mark(connection, high)
        return forget_rows(connection, chat_key, forgotten_ids(record)) > 0
    return False


def forget_rows(connection: apsw.Connection, chat_key: int, ids: Collection[str]) -> int:
    """Delete everything derived from the records `ids` of the chat; returns how many records.

    Ids of other chats are ignored: a tombstone in one chat's log can never touch another chat."""
    if not ids:
        return 0
    rows = _named_rows(connection, chat_key, ids)
    if not rows:
        return 0
    rowids = [int(row[0]) for row in rows]
    as_json = json.dumps(rowids)
    exchanges, touched = _summarized_exchanges(connection, chat_key, rows)
    # Summaries of every exchange holding a forgotten row and of their segments (which retell them),
    # vectors by trigger; the summarizers write new ones from what is left. A summary whose own
    # record is named goes too (the tombstone names those records: `summary_records_for`).
    delete_summaries_in(connection, touched, ())
    connection.execute("DELETE FROM summaries WHERE record_rowid IN (SELECT value FROM json_each(?))", (as_json,))
    connection.execute("DELETE FROM summary_records WHERE rowid IN (SELECT value FROM json_each(?))", (as_json,))
    connection.execute(
        "DELETE FROM embedding_jobs WHERE target = ? AND target_rowid NOT IN (SELECT id FROM summaries)",
        (SUMMARY_TARGET,),
    )
    connection.executemany("DELETE FROM exchanges WHERE id = ?", [(e,) for e in exchanges])
    connection.execute(
        "DELETE FROM embedding_jobs WHERE target IN (?, ?) AND target_rowid IN (SELECT value FROM json_each(?))",
        (MESSAGE_TARGET, MEMORY_TARGET, as_json),
    )
    for table in (MESSAGE_VECTORS, MEMORY_VECTORS):
        if table_exists(connection, table):
            # One point delete per rowid: vec0 answers `rowid = ?` directly, an IN list by scanning.
            connection.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r,) for r in rowids])
    connection.execute("DELETE FROM memory_chunks WHERE rowid IN (SELECT value FROM json_each(?))", (as_json,))
    connection.execute("DELETE FROM messages WHERE rowid IN (SELECT value FROM json_each(?))", (as_json,))
    return len(rowids)


def summary_records_for(connection: apsw.Connection, chat_key: int, ids: Collection[str]) -> list[int]:
    """Rowids of the summary records that forgetting the records `ids` makes obsolete (the summaries
    `forget_rows` deletes, every version of them): a tombstone names them too, so their text leaves
    the log and a reindex never folds them again."""
    rows = _named_rows(connection, chat_key, ids)
    return summary_record_rowids(connection, _summarized_exchanges(connection, chat_key, rows)[1]) if rows else []


def _named_rows(connection: apsw.Connection, chat_key: int, ids: Collection[str]) -> list[Row]:
    return fetch_all(
        connection,
        "SELECT rowid, segment_id, type, metadata, created_at FROM messages"
        " WHERE +chat = ? AND id IN (SELECT value FROM json_each(?))",  # by id: see summaries fold records_exist
        (chat_key, json.dumps(sorted(ids))),
    )


def _summarized_exchanges(connection: apsw.Connection, chat_key: int, rows: list[Row]) -> tuple[list[int], set[int]]:
    """(exchanges built on the rows, exchanges whose summaries may retell them). Summary records
    among the rows are left out: they are about earlier exchanges, not the one running when they
    were written."""
    rows = [row for row in rows if row[2] not in _SUMMARY_TYPES]
    exchanges = _exchanges_of(connection, chat_key, rows, json.dumps([int(row[0]) for row in rows]))
    return exchanges, _exchanges_touched(connection, chat_key, rows) | set(exchanges)


def checkpoint_truncate(connection: apsw.Connection) -> None:
    """Copy the WAL into the database file and empty it: the WAL keeps the pages as they were
    before a forget until then. Outside any transaction."""
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _exchanges_of(connection: apsw.Connection, chat_key: int, rows: list[Row], rowids: str) -> list[int]:
    """Exchanges built on the forgotten rows: their user message or final reply is forgotten, or
    their opening record is (found as the exchange fold finds it: chat, start, user message)."""
    found = {
        int(row[0])
        for row in fetch_all(
            connection,
            "SELECT id FROM exchanges WHERE chat = ? AND (user_message_rowid IN (SELECT value FROM json_each(?))"
            " OR final_message_rowid IN (SELECT value FROM json_each(?)))",
            (chat_key, rowids, rowids),
        )
    }
    for _rowid, _segment, type_, metadata, created_at in rows:
        if type_ != MessageType.EXCHANGE_OPEN.value:
            continue
        opened = json.loads(str(metadata)) if metadata else {}
        user_id = opened.get("user_message_id") if isinstance(opened, dict) else None
        user_rowid = fetch_value(connection, "SELECT rowid FROM messages WHERE id = ?", (user_id,)) if user_id else None
        found.update(
            int(row[0])
            for row in fetch_all(
                connection,
                "SELECT id FROM exchanges WHERE chat = ? AND started_at = ? AND user_message_rowid IS ?",
                (chat_key, created_at, user_rowid),
            )
        )
    return sorted(found)


def _exchanges_touched(connection: apsw.Connection, chat_key: int, rows: list[Row]) -> set[int]:
    """Exchanges holding a forgotten row, whose summaries may retell it: a user message belongs to the
    first exchange answering it, any other record to the exchange running when it was written."""
    found: set[int] = set()
    for rowid, _segment, type_, _metadata, created_at in rows:
        if _kind(connection, int(rowid), str(type_)) is RecordKind.USER_MESSAGE:
            sql = "SELECT id FROM exchanges WHERE chat = ? AND user_message_rowid >= ? ORDER BY user_message_rowid"
            params: tuple[object, ...] = (chat_key, rowid)
        else:
            sql = (
                "SELECT id FROM exchanges WHERE chat = ? AND started_at <= ? AND (ended_at IS NULL OR ended_at >= ?)"
                " ORDER BY started_at DESC, id DESC"
            )
            params = (chat_key, created_at, created_at)
        exchange_id = fetch_value(connection, sql + " LIMIT 1", params)
        if exchange_id is not None:
            found.add(int(exchange_id))
    return found


def _kind(connection: apsw.Connection, rowid: int, type_: str) -> RecordKind:
    role = fetch_value(connection, "SELECT role FROM messages WHERE rowid = ?", (rowid,))
    return record_kind(MessageType(type_), Role(str(role)))
