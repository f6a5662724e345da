"""Messages in PostgreSQL: append (idempotent on id) with the folds of control records, window, lookups.

The append also writes the record's log line (`log_records`, docs/decisions/132-log-with-several-engines.md)
in the same transaction: the database holds the log, and no fold exists without its record.

An append holds the chat's advisory lock for its transaction (`segments.lock_chat`): the chat's open
segment, the rowid order of its messages and each message's `context` (the previous conversation
message, searched at a lower weight) are decided one append at a time, whichever engine appends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime

from klaw.store.lease_fence import fence_for
from klaw.store.log_format import encode_record
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import (
    Connection,
    PostgresDatabase,
    clean_text,
    fetch_all,
    fetch_one,
    fetch_value,
)
from klaw.store.postgres.folds import fold_archival_record, fold_exchange_record
from klaw.store.postgres.leases import FENCE_HELD, fence_params
from klaw.store.postgres.segments import close_segment, lock_chat, open_segment_id
from klaw.store.postgres.sessions import save_session_model
from klaw.store.protocol import LogFirst
from klaw.store.records import (
    MESSAGE_TARGET,
    EmbeddingJobStatus,
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
from klaw.store.shared.vector_lru import ChatMatrixCache
from klaw.store.summaries.postgres.fold import fold_summary_record

_PENDING = EmbeddingJobStatus.PENDING.value
_OPEN_SEGMENT = "SELECT id FROM segments WHERE chat = %s AND ended_at IS NULL ORDER BY id DESC LIMIT 1"
# A segment's last rows are read down `messages_by_segment` (segment_id, rowid), whatever the planner guesses
# of the segment's size: `segment_id = x ORDER BY rowid DESC` let it walk the primary key back from the
# newest message instead, through every other chat's messages (and all of them when the chat has no open
# segment: 100-150 ms at 100,000 messages), or read a whole 100,000-message segment to sort it. A range
# the planner does not fold into an equality keeps `segment_id` in the order, which only that index
# gives without a sort (decision 427).
IN_SEGMENT = "m.segment_id BETWEEN {segment} AND {segment}"
LAST_FIRST = "ORDER BY m.segment_id DESC, m.rowid DESC"
_BEFORE = (  # the segment's last conversation message
    f"SELECT m.rowid, m.content FROM messages m WHERE {IN_SEGMENT.format(segment='s.id')} AND {conversation_sql()}"
    f" {LAST_FIRST} LIMIT 1"
)


def _state_sql(*, conversation: bool, fenced: bool) -> str:
    """After the chat's lock, in one read: whether a turn's lease still holds (true when no lease fences
    the write: the fence costs no round trip of its own, decision 200), whether the record is stored
    already, the chat's open segment, and for a conversation message the segment's last one (the new
    one's `context`, searched at a lower weight)."""
    held = FENCE_HELD if fenced else "true"
    before = "b.rowid, b.content" if conversation else "NULL, NULL"
    joins = f"LEFT JOIN LATERAL ({_OPEN_SEGMENT}) AS s ON true"
    if conversation:
        joins = f"{joins} LEFT JOIN LATERAL ({_BEFORE}) AS b ON true"
    stored = "EXISTS (SELECT 1 FROM messages WHERE id = %s)"
    return f"SELECT {held}, {stored}, s.id, {before} FROM (SELECT 1) AS one {joins}"


_STATES = {(c, f): _state_sql(conversation=c, fenced=f) for c in (False, True) for f in (False, True)}

# The row and its log line in one statement (data-modifying CTEs all run), with its embedding job when
# it gets one (the job as ENQUEUE_JOB queues it: due now, one per target).
_INSERT_LOGGED = (
    f"WITH m AS (INSERT INTO messages ({MESSAGE_INSERT_COLUMNS}, context)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING rowid),"
    " l AS (INSERT INTO log_records (id, chat, created_at, line) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (id) DO NOTHING),"
    " f AS (UPDATE messages SET following = %s WHERE rowid = %s)"
)
_INSERT_EMBEDDED = (
    f"{_INSERT_LOGGED}, j AS (INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at,"
    " created_at) SELECT %s, m.rowid, %s, 0, %s, %s FROM m ON CONFLICT (target, target_rowid) DO NOTHING)"
    " SELECT rowid FROM m"
)
_INSERT_LOGGED = f"{_INSERT_LOGGED} SELECT rowid FROM m"


class PostgresMessages(MessageReads[PostgresDatabase, ChatKeys]):
    dialect = POSTGRES

    def __init__(
        self,
        db: PostgresDatabase,
        chats: ChatKeys,
        clock: Callable[[], datetime] = utc_now,
        vector_cache: ChatMatrixCache | None = None,
    ) -> None:
        super().__init__(db, chats)
        self._clock = clock
        self._vector_cache = vector_cache  # this engine's int8 copies, one dropped when its chat forgets

    async def append(
        self, record: MessageRecord, *, embed: bool = False, log_first: LogFirst | None = None
    ) -> StoredMessage:
        if log_first is not None:  # none from ingestion: this store keeps the log (`log_records`)
            await asyncio.to_thread(log_first)
        return await self._db.in_transaction(lambda connection: self.append_in(connection, record, embed=embed))

    async def append_many(
        self,
        records: Sequence[MessageRecord],
        *,
        embed: Sequence[bool] | None = None,
        log_first: LogFirst | None = None,
    ) -> list[StoredMessage]:
        flags = embed_flags(records, embed)
        if log_first is not None:
            await asyncio.to_thread(log_first)

        async def append_all(connection: Connection) -> list[StoredMessage]:
            return [await self.append_in(connection, r, embed=e) for r, e in zip(records, flags, strict=True)]

        return await self._db.in_transaction(append_all)

    async def append_in(self, connection: Connection, record: MessageRecord, *, embed: bool = False) -> StoredMessage:
        """Append inside the caller's transaction: the one place that decides a message's segment, and
        that queues its embedding in the same transaction as the row.

        Three statements for a new message (the lock, what the chat holds, the insert), each a round trip
        to the server: what is stored and where (and, in a turn, whether its lease holds) is read by one,
        and the row, its log line, the previous message's `following` and its embedding job are written by
        one (it was nine)."""
        chat_key = await self._chats.ensure(connection, record.chat)
        await lock_chat(connection, chat_key)
        created_at = to_millis(record.created_at)
        # a turn's write: only while its chat's lease is still this engine's (decision 200)
        fence = fence_for(record.chat)
        sql = _STATES[record.is_conversation, fence is not None]
        fenced = () if fence is None else fence_params(chat_key, fence)
        state = await fetch_one(connection, sql, (*fenced, record.id, chat_key))
        assert state is not None  # one row, whatever the chat holds
        held, stored, segment_id, before_rowid, context = state  # the segment's previous conversation message
        if fence is not None and not held:
            raise fence.lost()
        if stored:  # appended before (a replay, a resend), perhaps by another engine while we waited
            existing = await self._stored(connection, record.id)
            assert existing is not None
            return existing
        if segment_id is None:
            segment_id = await open_segment_id(connection, chat_key, created_at)
        now = to_millis(self._clock())
        values = (*message_values(record, chat_key, segment_id, clean_text), context)
        # the log line, and the previous conversation message followed by this one now (migration 0005)
        logged = (record.id, chat_key, created_at, encode_record(record), values[7], before_rowid)
        if embed:
            row = await fetch_one(connection, _INSERT_EMBEDDED, (*values, *logged, MESSAGE_TARGET, _PENDING, now, now))
        else:
            row = await fetch_one(connection, _INSERT_LOGGED, (*values, *logged))
        assert row is not None
        rowid = int(row[0])
        if record.type is MessageType.SESSION_BREAK:
            await close_segment(connection, segment_id, chat_key, created_at)
        elif record.type is MessageType.MODEL_SWITCH:
            model = (record.metadata or {}).get("model")
            if isinstance(model, str):
                await save_session_model(connection, chat_key, model, created_at)
        else:
            await fold_exchange_record(connection, record, chat_key, segment_id, rowid, created_at)
            await fold_archival_record(connection, record, chat_key, segment_id, rowid, created_at, now)
            await fold_summary_record(connection, record, chat_key, rowid, created_at, now)
            if record.type is MessageType.FORGET and self._vector_cache is not None:
                # No quantized copy of a forgotten message stays in memory (a search would reload it anyway:
                # the forget's deletes change the chat's vector version, decision 221).
                self._vector_cache.invalidate(chat_key)
        return StoredMessage(rowid=rowid, segment_id=segment_id, record=record)

    async def window(self, segment_id: int, limit: int) -> list[StoredMessage]:
        """The segment's last `limit` records a model may be shown, oldest first (`MessageReads.window`,
        read down `messages_by_segment`: `IN_SEGMENT`)."""
        rows = await self._db.read_rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {IN_SEGMENT.format(segment='%s')}"
            f" AND {not_control_sql()} {LAST_FIRST} LIMIT %s",
            (segment_id, segment_id, limit),
        )
        return [message_from_row(row) for row in reversed(rows)]

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
