"""The integer key of each chat (`chats.id`), which vec0 partitions vectors by."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import apsw

from klaw.store.records import ChatRef
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.query import Row, fetch_all, fetch_one


class ChatKeys:
    """Looks up or creates chat keys; cached, since a chat's key never changes.

    Used from the database's worker thread and the read connections' threads (`read_pool.py`); a
    lookup from either may store the same key, and a dict's get and set are atomic, so no lock."""

    def __init__(self) -> None:
        self._cache: dict[ChatRef, int] = {}

    def ensure(self, connection: apsw.Connection, chat: ChatRef) -> int:
        """The chat's key, inserting the chat if new. A new key is cached only once it is found
        again later, so a rolled-back insert never leaves a stale key behind."""
        key = self.find(connection, chat)
        if key is None:
            connection.execute("INSERT INTO chats (channel, chat_id) VALUES (?, ?)", (chat.channel, chat.chat_id))
            key = int(connection.last_insert_rowid())
        return key

    def forget(self) -> None:
        """Drop every kept key: a group of writes rolled back may have taken away a chat row a lookup
        inside it found (write_queue.py); the next lookups read the table again."""
        self._cache.clear()

    def cached(self, chat: ChatRef) -> int | None:
        """The chat's key if a lookup found it before, without reading the database."""
        return self._cache.get(chat)

    def find(self, connection: apsw.Connection, chat: ChatRef) -> int | None:
        """The chat's key, or None when the chat has never been stored (no insert)."""
        key = self._cache.get(chat)
        if key is None:
            row = fetch_one(
                connection, "SELECT id FROM chats WHERE channel = ? AND chat_id = ?", (chat.channel, chat.chat_id)
            )
            if row is None:
                return None
            key = int(row[0])
            self._cache[chat] = key
        return key

    async def rows(
        self, db: SqliteDatabase, chat: ChatRef, sql: str, params: Callable[[int], Sequence[Any]]
    ) -> list[Row]:
        """`sql`'s rows for `chat`, its parameters built from the chat's key: the read of a repository
        scoped to one chat. A chat never stored has no rows (and asking creates none)."""

        def query(connection: apsw.Connection) -> list[Row]:
            key = self.find(connection, chat)
            return [] if key is None else fetch_all(connection, sql, params(key))

        return await db.run(query)
