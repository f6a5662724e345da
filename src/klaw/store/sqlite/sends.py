"""`message_send`'s places per target chat in klaw.db (`sends`; klaw/store/send_protocol.py).

A reservation is one `BEGIN IMMEDIATE` transaction on the database thread: the write lock is taken
before the count is read, so another process on the file (a second engine losing the start race, a
CLI command) cannot count the same hour between this count and this insert.
"""

from __future__ import annotations

from datetime import datetime

import apsw

from klaw.store.records import ChatRef, from_millis, to_millis
from klaw.store.send_protocol import SEND_WINDOW_MS, SendPlace
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.query import fetch_one


class SqliteSends:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def reserve(self, target: ChatRef, at: datetime, per_hour: int) -> SendPlace:
        key, now = str(target), to_millis(at)

        def reserve(connection: apsw.Connection) -> SendPlace:
            connection.execute("BEGIN IMMEDIATE")
            try:
                place = _reserve_in(connection, key, now, per_hour)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return place

        return await self._db.run(reserve)

    async def give_back(self, place: int) -> None:
        await self._db.run(lambda connection: connection.execute("DELETE FROM sends WHERE id = ?", (place,)))


def _reserve_in(connection: apsw.Connection, key: str, now: int, per_hour: int) -> SendPlace:
    """The target's rows older than the hour deleted (the table holds at most the cap per target), those
    dated after now (a clock that ran ahead and was set right) counted as now (send_protocol.py), its
    hour counted, a place taken under the cap."""
    connection.execute("DELETE FROM sends WHERE target = ? AND sent_at <= ?", (key, now - SEND_WINDOW_MS))
    connection.execute("UPDATE sends SET sent_at = ? WHERE target = ? AND sent_at > ?", (now, key, now))
    row = fetch_one(connection, "SELECT count(*), min(sent_at) FROM sends WHERE target = ?", (key,))
    count, oldest = (int(row[0]), row[1]) if row is not None else (0, None)
    first = None if oldest is None else from_millis(int(oldest))
    if count >= per_hour:
        return SendPlace(None, count, first)
    connection.execute("INSERT INTO sends (target, sent_at) VALUES (?, ?)", (key, now))
    return SendPlace(connection.last_insert_rowid(), count, first)
