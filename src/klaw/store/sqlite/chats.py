"""The integer key of each chat (`chats.id`), which vec0 partitions vectors by."""

from __future__ import annotations

import apsw

from klaw.store.records import ChatRef
from klaw.store.sqlite.query import fetch_one


class ChatKeys:
    """Looks up or creates chat keys; cached, since a chat's key never changes.

    Used only from the database's worker thread, so the cache needs no lock."""

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
