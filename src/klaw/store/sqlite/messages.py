"""Messages in SQLite: append (idempotent on id), window, counts, lookups."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

import apsw

from klaw.store.protocol import LogFirst
from klaw.store.records import (
    MessageRecord,
    MessageType,
    StoredMessage,
    to_millis,
    utc_now,
)
from klaw.store.shared.reads import MessageReads
from klaw.store.shared.record_kinds import not_control_sql
from klaw.store.shared.rows import (
    MESSAGE_COLUMNS,
    MESSAGE_INSERT_COLUMNS,
    embed_flags,
    message_from_row,
    message_values,
)
from klaw.store.sqlite.archival_fold import fold_archival_record
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.embedding_jobs import insert_message_job
from klaw.store.sqlite.exchange_fold import fold_exchange_record
from klaw.store.sqlite.query import fetch_all, fetch_one, fetch_value
from klaw.store.sqlite.segments import close_segment, open_segment_id
from klaw.store.sqlite.sessions import save_session_model
from klaw.store.sqlite.vector_cache import ChatVectorCache
from klaw.store.sqlite.vector_snapshot import bump_version
from klaw.store.summaries.sqlite.fold import fold_summary_record

T = TypeVar("T")
_INSERT = f"INSERT INTO messages ({MESSAGE_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


class SqliteMessages(MessageReads[SqliteDatabase, ChatKeys]):
    def __init__(
        self,
        db: SqliteDatabase,
        chats: ChatKeys,
        clock: Callable[[], datetime] = utc_now,
        vector_cache: ChatVectorCache | None = None,
    ) -> None:
        super().__init__(db, chats)
        self._clock = clock  # when an embedding job is first due
        self._vector_cache = vector_cache  # copies of a chat's vectors, dropped when a `forget` deletes some

    async def append(
        self, record: MessageRecord, *, embed: bool = False, log_first: LogFirst | None = None
    ) -> StoredMessage:
        def insert(connection: apsw.Connection) -> StoredMessage:
            return self.append_in(connection, record, embed=embed)

        return await self._run(insert, log_first)

    async def append_many(
        self,
        records: Sequence[MessageRecord],
        *,
        embed: Sequence[bool] | None = None,
        log_first: LogFirst | None = None,
    ) -> list[StoredMessage]:
        """Append several records in one transaction (a turn's reply and its close, reindex, imports)."""
        flags = embed_flags(records, embed)

        def insert(connection: apsw.Connection) -> list[StoredMessage]:
            with connection:
                stored = [self.append_in(connection, r, embed=e) for r, e in zip(records, flags, strict=True)]
            return stored

        return await self._run(insert, log_first)

    async def _run(self, insert: Callable[[apsw.Connection], T], log_first: LogFirst | None) -> T:
        """The insert on the database thread, after the log write when there is one (the line durable
        before the row, in one hop: decision 211); committed with the appends queued beside it (decision 353)."""
        if log_first is None:
            return await self._db.run(insert, grouped=True)
        return await self._db.run_after(log_first, insert, grouped=True)

    def append_in(
        self,
        connection: apsw.Connection,
        record: MessageRecord,
        *,
        embed: bool = False,
        summary_checked: tuple[int, int] | None = None,
    ) -> StoredMessage:
        """Append on the worker thread; the one place that decides a message's segment, and that
        queues its embedding in the same transaction as the row. `summary_checked`: a summary record's
        fold target as its writer's check found it (fold.py's `fold_summary_record`)."""
        with connection:
            existing = fetch_one(connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?", (record.id,))
            if existing is not None:
                return message_from_row(existing)
            chat_key = self._chats.ensure(connection, record.chat)
            created_at = to_millis(record.created_at)
            segment_id = open_segment_id(connection, chat_key, created_at)
            connection.execute(_INSERT, message_values(record, chat_key, segment_id))
            rowid = int(connection.last_insert_rowid())
            if embed:
                insert_message_job(connection, rowid, to_millis(self._clock()))
            if record.type is MessageType.SESSION_BREAK:
                close_segment(connection, segment_id, chat_key, created_at)
            elif record.type is MessageType.MODEL_SWITCH:
                model = (record.metadata or {}).get("model")
                if isinstance(model, str):
                    save_session_model(connection, chat_key, model, created_at)
            else:
                fold_exchange_record(connection, record, chat_key, segment_id, rowid, created_at)
                now = to_millis(self._clock())
                forgot = fold_archival_record(connection, record, chat_key, segment_id, rowid, created_at, now)
                fold_summary_record(connection, record, chat_key, rowid, created_at, now, summary_checked)
                if forgot:
                    bump_version(connection, chat_key)  # a saved copy of the chat's vectors is stale now
                    if self._vector_cache is not None:
                        self._vector_cache.invalidate(chat_key)
        return StoredMessage(rowid=rowid, segment_id=segment_id, record=record)

    async def get(self, message_id: str) -> StoredMessage | None:
        def query(connection: apsw.Connection) -> StoredMessage | None:
            row = fetch_one(connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?", (message_id,))
            return None if row is None else message_from_row(row)

        return await self._db.run(query)

    async def by_rowids(self, rowids: Sequence[int]) -> list[StoredMessage]:
        """Messages for `rowids`, in the order given (missing rowids are skipped)."""
        if not rowids:
            return []
        wanted = list(rowids)

        def query(connection: apsw.Connection) -> list[StoredMessage]:
            marks = ",".join("?" * len(wanted))
            rows = fetch_all(connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid IN ({marks})", wanted)
            found = {row[0]: message_from_row(row) for row in rows}
            return [found[rowid] for rowid in wanted if rowid in found]

        return await self._db.read(query)  # beside the writes (decision 216)

    async def count_in_segment(self, segment_id: int, *, at_most: int | None = None) -> int:
        # The type filter needs each row, so an unbounded count reads the whole segment (~70 ms at
        # 100k messages); `at_most` stops at that many rows of the (segment_id, rowid) index.
        where = f"m.segment_id = ? AND {not_control_sql()}"
        sql = (
            f"SELECT count(*) FROM messages m WHERE {where}"
            if at_most is None
            else f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE {where} LIMIT ?)"
        )
        params: tuple[int, ...] = (segment_id,) if at_most is None else (segment_id, max(at_most, 0))

        def query(connection: apsw.Connection) -> int:
            return int(fetch_value(connection, sql, params))

        return await self._db.run(query)
