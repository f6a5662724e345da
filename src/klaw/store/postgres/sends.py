"""`message_send`'s places per target chat in PostgreSQL (`sends`; klaw/store/send_protocol.py).

A reservation is one transaction holding the target's advisory transaction lock (class 2; class 1 is
the chats' appends, `segments.lock_chat`), so the engines sharing the database count one target's
hour one at a time; other targets' reservations go on beside it.
"""

from __future__ import annotations

from datetime import datetime

from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_one
from klaw.store.records import ChatRef, from_millis, to_millis
from klaw.store.send_protocol import SEND_WINDOW_MS, SendPlace


class PostgresSends:
    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def reserve(self, target: ChatRef, at: datetime, per_hour: int) -> SendPlace:
        key, now = str(target), to_millis(at)

        async def reserve(connection: Connection) -> SendPlace:
            await execute(connection, "SELECT pg_advisory_xact_lock(2, hashtext(%s))", (key,))
            await execute(
                connection, "DELETE FROM sends WHERE target = %s AND sent_at <= %s", (key, now - SEND_WINDOW_MS)
            )
            await execute(  # dated after now (a clock set right after running ahead): counted as now
                connection, "UPDATE sends SET sent_at = %s WHERE target = %s AND sent_at > %s", (now, key, now)
            )
            row = await fetch_one(connection, "SELECT count(*), min(sent_at) FROM sends WHERE target = %s", (key,))
            count, oldest = (int(row[0]), row[1]) if row is not None else (0, None)
            first = None if oldest is None else from_millis(int(oldest))
            if count >= per_hour:
                return SendPlace(None, count, first)
            taken = await fetch_one(
                connection, "INSERT INTO sends (target, sent_at) VALUES (%s, %s) RETURNING id", (key, now)
            )
            assert taken is not None  # an INSERT … RETURNING returns its row
            return SendPlace(int(taken[0]), count, first)

        return await self._db.in_transaction(reserve)

    async def give_back(self, place: int) -> None:
        async with self._db.transaction() as connection:
            await execute(connection, "DELETE FROM sends WHERE id = %s", (place,))
