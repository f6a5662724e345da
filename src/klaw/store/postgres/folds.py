"""Control records folded into the tables as they are appended, inside the append's transaction:
`exchange_open` / `exchange_close` (exchanges), `memory_saved` (archival memory) and `forget`.

The same rules as SQLite's folds (`store/sqlite/exchange_fold.py`, `store/sqlite/archival_fold.py`),
so live ingestion, crash recovery and `klaw reindex` build the same rows on either backend. A forget
deletes everything derived from the named records of the chat; vectors go with their rows (foreign
keys `ON DELETE CASCADE`), and a deleted message's successor loses it from its `context` by trigger.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection

from klaw.store.archival_records import forgotten_ids, remembered_exchange_high
from klaw.store.exchange_records import (
    NO_EXCHANGE,
    OPENING_SQL,
    ExchangeClose,
    Opening,
    opened_exchange_id,
    opened_user_message_id,
    sent_unasked,
)
from klaw.store.postgres.connection import Connection, Row, clean_text, execute, fetch_all, fetch_one, fetch_value
from klaw.store.postgres.embedding_jobs import insert_job
from klaw.store.records import (
    MEMORY_TARGET,
    MESSAGE_TARGET,
    ExchangeStatus,
    MessageRecord,
    MessageType,
    RecordKind,
    Role,
    record_kind,
)
from klaw.store.shared.dialect import postgres_sql
from klaw.store.summaries.log_records import SUMMARY_RECORD_TYPES
from klaw.store.summaries.records import SUMMARY_TARGET

log = logging.getLogger(__name__)

_SUMMARY_TYPES = {t.value for t in SUMMARY_RECORD_TYPES}
_SEGMENT = "segment"
_OPENING_SQL = postgres_sql(OPENING_SQL)


async def opening(connection: Connection, chat_key: int, open_id: str) -> Opening | None:
    """The chat's `exchange_open` record `open_id`, None when it is not stored."""
    row = await fetch_one(connection, _OPENING_SQL, (open_id, chat_key, MessageType.EXCHANGE_OPEN.value))
    return None if row is None else Opening.from_row(row)


async def rowid_of(connection: Connection, message_id: object) -> int | None:
    if not isinstance(message_id, str):
        return None
    value = await fetch_value(connection, "SELECT rowid FROM messages WHERE id = %s", (message_id,))
    return None if value is None else int(value)


async def fold_exchange_record(
    connection: Connection, record: MessageRecord, chat_key: int, segment_id: int, rowid: int, created_at: int
) -> None:
    """As `store/sqlite/exchange_fold.py`'s: exchanges, and a message sent unasked kept to deliver."""
    if sent_unasked(record):
        await execute(
            connection,
            "INSERT INTO undelivered_replies (message_rowid, exchange_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (rowid, NO_EXCHANGE),
        )
    elif record.type is MessageType.EXCHANGE_OPEN:
        user_rowid = await rowid_of(connection, opened_user_message_id(record))
        await insert_exchange(
            connection, opened_exchange_id(record.metadata), chat_key, segment_id, created_at, user_rowid
        )
    elif record.type is MessageType.EXCHANGE_CLOSE:
        await _close(connection, record, chat_key, created_at)


async def insert_exchange(
    connection: Connection,
    exchange_id: int | None,
    chat_key: int,
    segment_id: int,
    started_at: int,
    user_rowid: int | None,
) -> int:
    """Insert an open exchange under `exchange_id` (None, or an id already taken: a new one from the
    high-water mark) and raise the mark to it; returns the id used (SQLite's `insert_exchange`)."""
    if exchange_id is not None and await fetch_value(
        connection, "SELECT 1 FROM exchanges WHERE id = %s", (exchange_id,)
    ):
        log.warning("exchange_open names exchange %d, which is already stored; numbered anew", exchange_id)
        exchange_id = None
    if exchange_id is None:
        exchange_id = await reserve_exchange_id(connection)
    await execute(
        connection,
        "INSERT INTO exchanges (id, chat, segment_id, started_at, status, user_message_rowid)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (exchange_id, chat_key, segment_id, started_at, ExchangeStatus.OPEN.value, user_rowid),
    )
    await raise_exchange_mark(connection, exchange_id)
    return exchange_id


async def reserve_exchange_id(connection: Connection) -> int:
    """The next exchange id, taken from the high-water mark in one statement (the row lock it takes
    makes two engines reserving together get different ids)."""
    value = await fetch_value(
        connection,
        "UPDATE id_marks SET high = greatest(high, (SELECT coalesce(max(id), 0) FROM exchanges)) + 1"
        " WHERE name = 'exchange' RETURNING high",
    )
    return int(value)


async def exchange_mark(connection: Connection) -> int:
    value = await fetch_value(
        connection,
        "SELECT greatest((SELECT high FROM id_marks WHERE name = 'exchange'),"
        " (SELECT coalesce(max(id), 0) FROM exchanges))",
    )
    return int(value or 0)


async def raise_exchange_mark(connection: Connection, exchange_id: int) -> None:
    await execute(connection, "UPDATE id_marks SET high = greatest(high, %s) WHERE name = 'exchange'", (exchange_id,))


async def _close(connection: Connection, record: MessageRecord, chat_key: int, ended_at: int) -> None:
    close = ExchangeClose.from_record(record)
    if close is None:
        log.warning("exchange_close record %s has no usable status or opening record; ignored", record.id)
        return
    opened = await opening(connection, chat_key, close.opened)
    if opened is None:
        log.warning("exchange_close record %s names an opening record that is not stored; ignored", record.id)
        return
    user_rowid = await rowid_of(connection, opened.user_message_id)
    row = await fetch_one(
        connection,
        "SELECT id FROM exchanges WHERE chat = %s AND started_at = %s AND user_message_rowid IS NOT DISTINCT FROM"
        " %s::bigint AND status = %s ORDER BY id = %s::bigint DESC NULLS LAST, id DESC LIMIT 1",
        (chat_key, opened.started_at, user_rowid, ExchangeStatus.OPEN.value, opened.exchange_id),
    )
    if row is None:
        log.warning("exchange_close record %s found no open exchange; ignored", record.id)
        return
    final_rowid = await rowid_of(connection, close.final_message_id)
    await execute(
        connection,
        "UPDATE exchanges SET status = %s, final_message_rowid = %s, ended_at = %s WHERE id = %s",
        (close.status.value, final_rowid, ended_at, row[0]),
    )
    if final_rowid is not None:  # to deliver, until a channel confirms it (decision 101)
        await execute(
            connection,
            "INSERT INTO undelivered_replies (message_rowid, exchange_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (final_rowid, row[0]),
        )


async def fold_archival_record(
    connection: Connection, record: MessageRecord, chat_key: int, segment_id: int, rowid: int, created_at: int, now: int
) -> None:
    if record.type is MessageType.MEMORY_SAVED:
        await execute(
            connection,
            "INSERT INTO memory_chunks (rowid, chat, segment_id, content, created_at) VALUES (%s, %s, %s, %s, %s)",
            (rowid, chat_key, segment_id, clean_text(record.content), created_at),
        )
        await insert_job(connection, MEMORY_TARGET, rowid, now)
    elif record.type is MessageType.FORGET:
        high = remembered_exchange_high(record)
        if high is not None:
            await raise_exchange_mark(connection, high)
        await forget_rows(connection, chat_key, forgotten_ids(record))


async def delete_summaries_in(
    connection: Connection, exchange_ids: Collection[int], segment_ids: Collection[int]
) -> int:
    """Delete the summaries of these exchanges and their segments' summaries, and every summary of
    these segments (vectors by cascade); returns how many."""
    deleted = 0
    exchanges = sorted(set(exchange_ids))
    if exchanges:
        deleted += await execute(
            connection,
            "DELETE FROM summaries WHERE kind = %s AND segment_id IN (SELECT segment_id FROM exchanges"
            " WHERE id = ANY(%s))",
            (_SEGMENT, exchanges),
        )
        deleted += await execute(connection, "DELETE FROM summaries WHERE exchange_id = ANY(%s)", (exchanges,))
    segments = sorted(set(segment_ids))
    if segments:
        deleted += await execute(connection, "DELETE FROM summaries WHERE segment_id = ANY(%s)", (segments,))
    return deleted


async def forget_rows(connection: Connection, chat_key: int, ids: Collection[str]) -> int:
    """Delete everything derived from the records `ids` of the chat; returns how many records. Ids of
    other chats are ignored."""
    if not ids:
        return 0
    # The log's own lines go too (the rewrite of the SQLite home's files, done by the database).
    await execute(connection, "DELETE FROM log_records WHERE chat = %s AND id = ANY(%s)", (chat_key, sorted(ids)))
    rows = await _named_rows(connection, chat_key, ids)
    if not rows:
        return 0
    rowids = [int(row[0]) for row in rows]
    exchanges, touched = await _summarized_exchanges(connection, chat_key, rows)
    await delete_summaries_in(connection, touched, ())
    await execute(connection, "DELETE FROM summaries WHERE record_rowid = ANY(%s)", (rowids,))
    await execute(connection, "DELETE FROM summary_records WHERE rowid = ANY(%s)", (rowids,))
    await execute(
        connection,
        "DELETE FROM embedding_jobs WHERE target = %s AND target_rowid NOT IN (SELECT id FROM summaries)",
        (SUMMARY_TARGET,),
    )
    await execute(connection, "DELETE FROM exchanges WHERE id = ANY(%s)", (exchanges,))
    await execute(
        connection,
        "DELETE FROM embedding_jobs WHERE target IN (%s, %s) AND target_rowid = ANY(%s)",
        (MESSAGE_TARGET, MEMORY_TARGET, rowids),
    )
    await execute(connection, "DELETE FROM memory_chunks WHERE rowid = ANY(%s)", (rowids,))
    await execute(connection, "DELETE FROM messages WHERE rowid = ANY(%s)", (rowids,))
    return len(rowids)


async def summary_records_for(connection: Connection, chat_key: int, ids: Collection[str]) -> list[int]:
    """Rowids of the summary records that forgetting `ids` makes obsolete (every version)."""
    rows = await _named_rows(connection, chat_key, ids)
    if not rows:
        return []
    return await summary_record_rowids(connection, (await _summarized_exchanges(connection, chat_key, rows))[1])


async def summary_record_rowids(connection: Connection, exchange_ids: Collection[int]) -> list[int]:
    wanted = sorted(set(exchange_ids))
    rows = await fetch_all(
        connection,
        "SELECT rowid FROM summary_records WHERE exchange_id = ANY(%s) OR (exchange_id IS NULL AND segment_id IN"
        " (SELECT segment_id FROM exchanges WHERE id = ANY(%s))) ORDER BY rowid",
        (wanted, wanted),
    )
    return [int(row[0]) for row in rows]


async def _named_rows(connection: Connection, chat_key: int, ids: Collection[str]) -> list[Row]:
    return await fetch_all(
        connection,
        "SELECT rowid, segment_id, type, metadata, created_at, role FROM messages WHERE chat = %s AND id = ANY(%s)",
        (chat_key, sorted(ids)),
    )


async def _summarized_exchanges(connection: Connection, chat_key: int, rows: list[Row]) -> tuple[list[int], set[int]]:
    rows = [row for row in rows if row[2] not in _SUMMARY_TYPES]
    exchanges = await _exchanges_of(connection, chat_key, rows)
    return exchanges, await _exchanges_touched(connection, chat_key, rows) | set(exchanges)


async def _exchanges_of(connection: Connection, chat_key: int, rows: list[Row]) -> list[int]:
    rowids = [int(row[0]) for row in rows]
    found = {
        int(row[0])
        for row in await fetch_all(
            connection,
            "SELECT id FROM exchanges WHERE chat = %s AND (user_message_rowid = ANY(%s)"
            " OR final_message_rowid = ANY(%s))",
            (chat_key, rowids, rowids),
        )
    }
    for _rowid, _segment, type_, metadata, created_at, _role in rows:
        if type_ != MessageType.EXCHANGE_OPEN.value:
            continue
        opened = json.loads(str(metadata)) if metadata else {}
        user_id = opened.get("user_message_id") if isinstance(opened, dict) else None
        user_rowid = await rowid_of(connection, user_id)
        found.update(
            int(row[0])
            for row in await fetch_all(
                connection,
                "SELECT id FROM exchanges WHERE chat = %s AND started_at = %s"
                " AND user_message_rowid IS NOT DISTINCT FROM %s::bigint",
                (chat_key, created_at, user_rowid),
            )
        )
    return sorted(found)


async def _exchanges_touched(connection: Connection, chat_key: int, rows: list[Row]) -> set[int]:
    found: set[int] = set()
    for rowid, _segment, type_, _metadata, created_at, role in rows:
        if record_kind(MessageType(type_), Role(role)) is RecordKind.USER_MESSAGE:
            sql = "SELECT id FROM exchanges WHERE chat = %s AND user_message_rowid >= %s ORDER BY user_message_rowid"
            params: tuple[object, ...] = (chat_key, rowid)
        else:
            sql = (
                "SELECT id FROM exchanges WHERE chat = %s AND started_at <= %s AND (ended_at IS NULL OR ended_at >= %s)"
                " ORDER BY started_at DESC, id DESC"
            )
            params = (chat_key, created_at, created_at)
        exchange_id = await fetch_value(connection, sql + " LIMIT 1", params)
        if exchange_id is not None:
            found.add(int(exchange_id))
    return found
