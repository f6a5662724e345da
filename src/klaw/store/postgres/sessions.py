"""Sessions, exchanges and runtime settings in PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import (
    Connection,
    PostgresDatabase,
    execute,
    fetch_one,
    fetch_value,
)
from klaw.store.postgres.folds import exchange_mark, insert_exchange, reserve_exchange_id
from klaw.store.postgres.segments import open_segment_id
from klaw.store.records import (
    ChatRef,
    Exchange,
    ExchangeStatus,
    to_millis,
)
from klaw.store.shared.dialect import POSTGRES
from klaw.store.shared.reads import ExchangeReads, SessionReads


async def save_session_model(connection: Connection, chat_key: int, model: str, at: int) -> None:
    segment_id = await open_segment_id(connection, chat_key, at)
    await execute(
        connection,
        "INSERT INTO sessions (chat, model, segment_id, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (chat) DO UPDATE SET model = excluded.model, segment_id = excluded.segment_id,"
        " updated_at = excluded.updated_at",
        (chat_key, model, segment_id, at, at),
    )


class PostgresSessions(SessionReads[PostgresDatabase, ChatKeys]):
    dialect = POSTGRES

    async def save(self, chat: ChatRef, model: str, at: datetime) -> None:
        async with self._db.transaction() as connection:
            await save_session_model(connection, await self._chats.ensure(connection, chat), model, to_millis(at))


class PostgresExchanges(ExchangeReads[PostgresDatabase, ChatKeys]):
    dialect = POSTGRES

    async def open(self, chat: ChatRef, segment_id: int, user_message_rowid: int | None, at: datetime) -> Exchange:
        async with self._db.transaction() as connection:
            chat_key = await self._chats.ensure(connection, chat)
            exchange_id = await insert_exchange(
                connection, None, chat_key, segment_id, to_millis(at), user_message_rowid
            )
        return Exchange(exchange_id, chat, segment_id, at, ExchangeStatus.OPEN, user_message_rowid)

    async def reserve_id(self) -> int:
        async with self._db.transaction() as connection:
            return await reserve_exchange_id(connection)

    async def high_water(self) -> int:
        async with self._db.connection() as connection:
            return await exchange_mark(connection)

    async def mark_delivered(self, record_ids: Sequence[str]) -> int:
        if not record_ids:
            return 0
        async with self._db.transaction() as connection:
            value = await fetch_value(
                connection,
                "WITH gone AS (DELETE FROM undelivered_replies WHERE message_rowid IN"
                " (SELECT rowid FROM messages WHERE id = ANY(%s)) RETURNING 1) SELECT count(*) FROM gone",
                (list(record_ids),),
            )
        return int(value or 0)

    async def close(
        self, exchange_id: int, status: ExchangeStatus, final_message_rowid: int | None, at: datetime
    ) -> None:
        async with self._db.transaction() as connection:
            await execute(
                connection,
                "UPDATE exchanges SET status = %s, final_message_rowid = %s, ended_at = %s WHERE id = %s",
                (status.value, final_message_rowid, to_millis(at), exchange_id),
            )


class PostgresSettings:
    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def get(self, key: str) -> Any | None:
        async with self._db.connection() as connection:
            row = await fetch_one(connection, "SELECT value FROM settings WHERE key = %s", (key,))
        return None if row is None else json.loads(row[0])

    async def set(self, key: str, value: Any) -> None:
        async with self._db.transaction() as connection:
            await execute(
                connection,
                "INSERT INTO settings (key, value, updated_at) VALUES (%s, %s, %s) ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value, updated_at = excluded.updated_at",
                (key, json.dumps(value), int(time.time() * 1000)),
            )

    async def delete(self, key: str) -> None:
        async with self._db.transaction() as connection:
            await execute(connection, "DELETE FROM settings WHERE key = %s", (key,))
