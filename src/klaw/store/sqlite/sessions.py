"""Sessions and exchanges in SQLite."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import apsw

from klaw.store.records import (
    ChatRef,
    Exchange,
    ExchangeStatus,
    SessionState,
    to_millis,
)
from klaw.store.shared.reads import ExchangeReads, SessionReads
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.exchange_fold import exchange_mark, insert_exchange, reserve_exchange_id
from klaw.store.sqlite.read_cache import ReadCache, TableGenerations
from klaw.store.sqlite.segments import open_segment_id


def save_session_model(connection: apsw.Connection, chat_key: int, model: str, at: int) -> None:
    segment_id = open_segment_id(connection, chat_key, at)
    connection.execute(
        "INSERT INTO sessions (chat, model, segment_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (chat) DO UPDATE SET model = excluded.model, segment_id = excluded.segment_id,"
        " updated_at = excluded.updated_at",
        (chat_key, model, segment_id, at, at),
    )


class SqliteSessions(SessionReads[SqliteDatabase, ChatKeys]):
    def __init__(self, db: SqliteDatabase, chats: ChatKeys, generations: TableGenerations) -> None:
        super().__init__(db, chats)
        # A chat's model changes only by a write to `sessions` (read_cache.py, decision 197).
        self._states: ReadCache[ChatRef, SessionState | None] = ReadCache(db, generations, ("sessions",))

    async def get(self, chat: ChatRef) -> SessionState | None:
        return await self._states.get(chat, lambda: SessionReads.get(self, chat))

    async def save(self, chat: ChatRef, model: str, at: datetime) -> None:
        def write(connection: apsw.Connection) -> None:
            with connection:
                save_session_model(connection, self._chats.ensure(connection, chat), model, to_millis(at))

        await self._db.run(write)


class SqliteExchanges(ExchangeReads[SqliteDatabase, ChatKeys]):
    async def open(self, chat: ChatRef, segment_id: int, user_message_rowid: int | None, at: datetime) -> Exchange:
        def write(connection: apsw.Connection) -> int:
            with connection:
                chat_key = self._chats.ensure(connection, chat)
                exchange_id = insert_exchange(connection, None, chat_key, segment_id, to_millis(at), user_message_rowid)
            return exchange_id

        exchange_id = await self._db.run(write)
        return Exchange(exchange_id, chat, segment_id, at, ExchangeStatus.OPEN, user_message_rowid)

    async def reserve_id(self) -> int:
        def write(connection: apsw.Connection) -> int:
            with connection:
                exchange_id = reserve_exchange_id(connection)
            return exchange_id

        return await self._db.run(write, grouped=True)  # committed with the appends beside it (decision 353)

    async def high_water(self) -> int:
        return await self._db.run(exchange_mark)

    async def mark_delivered(self, record_ids: Sequence[str]) -> int:
        def write(connection: apsw.Connection) -> int:
            with connection:
                connection.execute(
                    "DELETE FROM undelivered_replies WHERE message_rowid IN"
                    " (SELECT rowid FROM messages WHERE id IN (SELECT value FROM json_each(?)))",
                    (json.dumps(list(record_ids)),),
                )
                changed = int(connection.changes())
            return changed

        # After the turn, off its path (decision 229): behind the turns' own writes (decision 382).
        return await self._db.run(write, grouped=True, behind=True) if record_ids else 0

    async def close(
        self, exchange_id: int, status: ExchangeStatus, final_message_rowid: int | None, at: datetime
    ) -> None:
        await self._db.run(
            lambda connection: connection.execute(
                "UPDATE exchanges SET status = ?, final_message_rowid = ?, ended_at = ? WHERE id = ?",
                (status.value, final_message_rowid, to_millis(at), exchange_id),
            )
        )
