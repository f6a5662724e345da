"""Segments in SQLite: a chat's open segment is the one with no `ended_at`."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

import apsw

from klaw.store.protocol import StorageError
from klaw.store.records import ChatRef, Segment, from_millis, to_millis
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.query import fetch_all, fetch_one
from klaw.store.sqlite.read_cache import ReadCache, TableGenerations


def open_segment_id(connection: apsw.Connection, chat_key: int, started_at: int) -> int:
    """The chat's open segment, created (starting at `started_at`) if there is none."""
    row = fetch_one(
        connection, "SELECT id FROM segments WHERE chat = ? AND ended_at IS NULL ORDER BY id DESC LIMIT 1", (chat_key,)
    )
    if row is not None:
        return int(row[0])
    connection.execute("INSERT INTO segments (chat, started_at) VALUES (?, ?)", (chat_key, started_at))
    return int(connection.last_insert_rowid())


def close_segment(connection: apsw.Connection, segment_id: int, chat_key: int, at: int) -> int:
    """End `segment_id` at `at` and open the chat's next segment; returns the new segment's id."""
    connection.execute("UPDATE segments SET ended_at = ? WHERE id = ?", (at, segment_id))
    connection.execute("INSERT INTO segments (chat, started_at) VALUES (?, ?)", (chat_key, at))
    return int(connection.last_insert_rowid())


class SqliteSegments:
    def __init__(
        self, db: SqliteDatabase, chats: ChatKeys, clock: Callable[[], datetime], generations: TableGenerations
    ) -> None:
        self._db = db
        self._chats = chats
        self._clock = clock
        # A chat's open segment changes only by a write to `segments` (read_cache.py, decision 197).
        self._current: ReadCache[ChatRef, Segment] = ReadCache(db, generations, ("segments",))
        # The summarizer asks after the same waiting segments on every pass; only a write to `segments`
        # (a segment closed, opened or deleted) changes the answer.
        self._open: ReadCache[frozenset[int], frozenset[int]] = ReadCache(db, generations, ("segments",), size=8)

    async def current(self, chat: ChatRef) -> Segment:
        now = to_millis(self._clock())

        def query(connection: apsw.Connection) -> Segment:
            with connection:
                chat_key = self._chats.ensure(connection, chat)
                segment_id = open_segment_id(connection, chat_key, now)
            return self._load(connection, segment_id, chat)

        return await self._current.get(chat, lambda: self._db.run(query))

    async def get(self, segment_id: int) -> Segment | None:
        def query(connection: apsw.Connection) -> Segment | None:
            row = fetch_one(
                connection,
                "SELECT c.channel, c.chat_id FROM segments s JOIN chats c ON c.id = s.chat WHERE s.id = ?",
                (segment_id,),
            )
            return None if row is None else self._load(connection, segment_id, ChatRef(row[0], row[1]))

        return await self._db.run(query)

    async def open_among(self, segment_ids: Collection[int]) -> set[int]:
        wanted = frozenset(segment_ids)
        if not wanted:
            return set()

        async def read() -> frozenset[int]:
            rows = await self._db.rows(
                "SELECT id FROM segments WHERE ended_at IS NULL AND id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(wanted)),),
            )
            return frozenset(int(row[0]) for row in rows)

        return set(await self._open.get(wanted, read))

    async def list(self, chat: ChatRef) -> list[Segment]:
        def query(connection: apsw.Connection) -> list[Segment]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            rows = fetch_all(
                connection, "SELECT id, started_at, ended_at FROM segments WHERE chat = ? ORDER BY id", (chat_key,)
            )
            return [_segment(chat, row[0], row[1], row[2]) for row in rows]

        return await self._db.run(query)

    async def chats(self) -> Sequence[ChatRef]:
        rows = await self._db.rows(
            "SELECT c.channel, c.chat_id FROM chats c JOIN segments s ON s.chat = c.id"
            " GROUP BY c.id ORDER BY max(s.id) DESC",
        )
        return [ChatRef(row[0], row[1]) for row in rows]

    @staticmethod
    def _load(connection: apsw.Connection, segment_id: int, chat: ChatRef) -> Segment:
        row = fetch_one(connection, "SELECT id, started_at, ended_at FROM segments WHERE id = ?", (segment_id,))
        if row is None:
            raise StorageError(f"segment {segment_id} does not exist")
        return _segment(chat, row[0], row[1], row[2])


def _segment(chat: ChatRef, segment_id: int, started_at: int, ended_at: int | None) -> Segment:
    return Segment(
        id=segment_id,
        chat=chat,
        started_at=from_millis(started_at),
        ended_at=None if ended_at is None else from_millis(ended_at),
    )
