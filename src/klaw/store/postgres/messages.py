"""Messages in PostgreSQL: append (idempotent on id) with the folds of control records, window, lookups.

The append also writes the record's log line (`log_records`, docs/decisions/132-log-with-several-engines.md)
in the same transaction: the database holds the log, and no fold exists without its record.

An append holds the chat's advisory lock for its transaction (`segments.lock_chat`): the chat's open
segment, the rowid order of its messages, each message's `context` (the previous conversation
message, searched at a lower weight) and the previous message's `following` (this one: migration
0005) are decided one append at a time, whichever engine appends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from klaw.store.log_format import encode_record
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import (
    Connection,
    PostgresDatabase,
    clean_text,
    execute,
    fetch_all,
    fetch_one,
    fetch_value,
)
from klaw.store.postgres.embedding_jobs import insert_job
from klaw.store.postgres.folds import fold_archival_record, fold_exchange_record
from klaw.store.postgres.segments import close_segment, lock_chat, open_segment_id
from klaw.store.postgres.sessions import save_session_model
from klaw.store.records import (
    MESSAGE_TARGET,
    MessageRecord,
    MessageType,
    StoredMessage,
    to_millis,
    utc_now,
)
from klaw.store.shared.dialect import POSTGRES
from klaw.store.shared.reads import MessageReads
from klaw.store.shared.record_kinds import conversation_sql, not_control_sql
from klaw.store.shared.rows import (
    MESSAGE_COLUMNS,
    MESSAGE_INSERT_COLUMNS,
    embed_flags,
    message_from_row,
    message_values,
)
from klaw.store.summaries.postgres.fold import fold_summary_record

_INSERT = (
    f"INSERT INTO messages ({MESSAGE_INSERT_COLUMNS}, context)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING rowid"
)


class PostgresMessages(MessageReads[PostgresDatabase, ChatKeys]):
    dialect = POSTGRES

    def __init__(self, db: PostgresDatabase, chats: ChatKeys, clock: Callable[[], datetime] = utc_now) -> None:
        super().__init__(db, chats)
        self._clock = clock

    async def append(self, record: MessageRecord, *, embed: bool = False) -> StoredMessage:
        async with self._db.transaction() as connection:
            return await self.append_in(connection, record, embed=embed)

    async def append_many(
        self, records: Sequence[MessageRecord], *, embed: Sequence[bool] | None = None
    ) -> list[StoredMessage]:
        flags = embed_flags(records, embed)
        async with self._db.transaction() as connection:
            return [await self.append_in(connection, r, embed=e) for r, e in zip(records, flags, strict=True)]

    async def append_in(self, connection: Connection, record: MessageRecord, *, embed: bool = False) -> StoredMessage:
        """Append inside the caller's transaction: the one place that decides a message's segment, and
        that queues its embedding in the same transaction as the row."""
        existing = await self._stored(connection, record.id)
        if existing is not None:
            return existing
        chat_key = await self._chats.ensure(connection, record.chat)
        await lock_chat(connection, chat_key)
        existing = await self._stored(connection, record.id)  # appended by another engine while we waited
        if existing is not None:
            return existing
        created_at = to_millis(record.created_at)
        segment_id = await open_segment_id(connection, chat_key, created_at)
        before = None  # the previous conversation message of the segment: (rowid, text)
        if record.is_conversation:
            before = await fetch_one(
                connection,
                f"SELECT m.rowid, m.content FROM messages m WHERE m.segment_id = %s AND {conversation_sql()}"
                " ORDER BY m.rowid DESC LIMIT 1",
                (segment_id,),
            )
        values = message_values(record, chat_key, segment_id, clean_text)
        row = await fetch_one(connection, _INSERT, (*values, None if before is None else before[1]))
        assert row is not None
        rowid = int(row[0])
        if before is not None:  # it is followed now (migration 0005)
            await execute(connection, "UPDATE messages SET following = %s WHERE rowid = %s", (values[7], before[0]))
        await execute(
            connection,
            "INSERT INTO log_records (id, chat, created_at, line) VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (record.id, chat_key, created_at, encode_record(record)),
        )
        now = to_millis(self._clock())
        if embed:
            await insert_job(connection, MESSAGE_TARGET, rowid, now)
        if record.type is MessageType.SESSION_BREAK:
            await close_segment(connection, segment_id, chat_key, created_at)
        elif record.type is MessageType.MODEL_SWITCH:
            model = (record.metadata or {}).get("model")
            if isinstance(model, str):
                await save_session_model(connection, chat_key, model, created_at)
        else:
            await fold_exchange_record(connection, record, chat_key, segment_id, created_at)
            await fold_archival_record(connection, record, chat_key, segment_id, rowid, created_at, now)
            await fold_summary_record(connection, record, chat_key, rowid, created_at, now)
        return StoredMessage(rowid=rowid, segment_id=segment_id, record=record)

    @staticmethod
    async def _stored(connection: Connection, message_id: str) -> StoredMessage | None:
        row = await fetch_one(connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = %s", (message_id,))
        return None if row is None else message_from_row(row)

    async def get(self, message_id: str) -> StoredMessage | None:
        async with self._db.connection() as connection:
            return await self._stored(connection, message_id)

    async def by_rowids(self, rowids: Sequence[int]) -> list[StoredMessage]:
        if not rowids:
            return []
        wanted = list(rowids)
        async with self._db.connection() as connection:
            rows = await fetch_all(
                connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid = ANY(%s)", (wanted,)
            )
        found = {int(row[0]): message_from_row(row) for row in rows}
        return [found[rowid] for rowid in wanted if rowid in found]

    async def count_in_segment(self, segment_id: int, *, at_most: int | None = None) -> int:
        where = f"m.segment_id = %s AND {not_control_sql()}"
        params: tuple[int, ...] = (segment_id,)
        if at_most is None:
            sql = f"SELECT count(*) FROM messages m WHERE {where}"
        else:
            sql = f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE {where} LIMIT %s) AS counted"
            params = (segment_id, max(at_most, 0))
        async with self._db.connection() as connection:
            return int(await fetch_value(connection, sql, params))
