"""The integer key of each chat (`chats.id`), looked up or created, cached once committed elsewhere."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from klaw.store.postgres.connection import Connection, PostgresDatabase, Row, fetch_all, fetch_one
from klaw.store.records import ChatRef


class ChatKeys:
    """A chat's key never changes, so it is cached; a key is cached only when found by a lookup, so a
    rolled-back insert never leaves a stale key behind. Two engines creating the same chat at once
    both get the one row (`ON CONFLICT`)."""

    def __init__(self) -> None:
        self._cache: dict[ChatRef, int] = {}

    async def ensure(self, connection: Connection, chat: ChatRef) -> int:
        key = await self.find(connection, chat)
        if key is not None:
            return key
        # DO NOTHING, not DO UPDATE: an update would lock the row (a key column: FOR UPDATE) before the
        # caller takes the chat's advisory lock, while an append holding that lock waits on the row for
        # its foreign key, a deadlock (decision 248). A conflict waits for the other insert's commit.
        row = await fetch_one(
            connection,
            "INSERT INTO chats (channel, chat_id) VALUES (%s, %s)"
            " ON CONFLICT (channel, chat_id) DO NOTHING RETURNING id",
            (chat.channel, chat.chat_id),
        )
        if row is not None:
            return int(row[0])
        key = await self.find(connection, chat)  # created by a transaction committed meanwhile
        assert key is not None  # a conflicting row is committed once ON CONFLICT returns
        return key

    async def find(self, connection: Connection, chat: ChatRef) -> int | None:
        key = self._cache.get(chat)
        if key is None:
            row = await fetch_one(
                connection, "SELECT id FROM chats WHERE channel = %s AND chat_id = %s", (chat.channel, chat.chat_id)
            )
            if row is None:
                return None
            key = int(row[0])
            self._cache[chat] = key
        return key

    async def rows(
        self, db: PostgresDatabase, chat: ChatRef, sql: str, params: Callable[[int], Sequence[Any]]
    ) -> list[Row]:
        """`sql`'s rows for `chat`, its parameters built from the chat's key: the read of a repository
        scoped to one chat. A chat never stored has no rows (and asking creates none)."""
        async with db.connection() as connection:
            key = await self.find(connection, chat)
            return [] if key is None else await fetch_all(connection, sql, params(key))

    async def value(self, db: PostgresDatabase, chat: ChatRef, sql: str, params: Callable[[int], Sequence[Any]]) -> Any:
        """The first column of `rows`' first row; None when there is none."""
        found = await self.rows(db, chat, sql, params)
        return found[0][0] if found else None
