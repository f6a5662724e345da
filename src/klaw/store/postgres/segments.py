"""Segments in PostgreSQL: a chat's open segment is the one with no `ended_at`."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_all, fetch_one
from klaw.store.protocol import StorageError
from klaw.store.records import ChatRef, Segment, from_millis, to_millis


async def lock_chat(connection: Connection, chat_key: int) -> None:
    """Serialise the chat's writes until the transaction ends (several engines, or the summarizer beside a
    turn): which segment is open, a message's rowid order and its `context` are decided under it."""
    await execute(connection, "SELECT pg_advisory_xact_lock(1, %s::integer)", (chat_key % 2_000_000_000,))


async def open_segment_id(connection: Connection, chat_key: int, started_at: int) -> int:
    """The chat's open segment, created (starting at `started_at`) if there is none."""
    row = await fetch_one(
        connection,
        "SELECT id FROM segments WHERE chat = %s AND ended_at IS NULL ORDER BY id DESC LIMIT 1",
        (chat_key,),
    )
    if row is not None:
        return int(row[0])
    created = await fetch_one(
        connection, "INSERT INTO segments (chat, started_at) VALUES (%s, %s) RETURNING id", (chat_key, started_at)
    )
    assert created is not None
    return int(created[0])


async def close_segment(connection: Connection, segment_id: int, chat_key: int, at: int) -> int:
    """End `segment_id` at `at` and open the chat's next segment; returns the new segment's id."""
    await execute(connection, "UPDATE segments SET ended_at = %s WHERE id = %s", (at, segment_id))
    created = await fetch_one(
        connection, "INSERT INTO segments (chat, started_at) VALUES (%s, %s) RETURNING id", (chat_key, at)
    )
    assert created is not None
    return int(created[0])


class PostgresSegments:
    def __init__(self, db: PostgresDatabase, chats: ChatKeys, clock: Callable[[], datetime]) -> None:
        self._db = db
        self._chats = chats
        self._clock = clock

    async def current(self, chat: ChatRef) -> Segment:
        now = to_millis(self._clock())
        async with self._db.transaction() as connection:
            chat_key = await self._chats.ensure(connection, chat)
            await lock_chat(connection, chat_key)
            segment_id = await open_segment_id(connection, chat_key, now)
            return await _load(connection, segment_id, chat)

    async def get(self, segment_id: int) -> Segment | None:
        async with self._db.connection() as connection:
            row = await fetch_one(
                connection,
                "SELECT c.channel, c.chat_id FROM segments s JOIN chats c ON c.id = s.chat WHERE s.id = %s",
                (segment_id,),
            )
            return None if row is None else await _load(connection, segment_id, ChatRef(row[0], row[1]))

    async def open_among(self, segment_ids: Collection[int]) -> set[int]:
        if not segment_ids:
            return set()
        rows = await self._db.rows(
            "SELECT id FROM segments WHERE ended_at IS NULL AND id = ANY(%s)", (sorted(segment_ids),)
        )
        return {int(row[0]) for row in rows}

    async def list(self, chat: ChatRef) -> list[Segment]:
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is None:
                return []
            rows = await fetch_all(
                connection, "SELECT id, started_at, ended_at FROM segments WHERE chat = %s ORDER BY id", (chat_key,)
            )
        return [_segment(chat, row[0], row[1], row[2]) for row in rows]

    async def chats(self) -> Sequence[ChatRef]:
        rows = await self._db.rows(
            "SELECT c.channel, c.chat_id FROM chats c JOIN segments s ON s.chat = c.id"
            " GROUP BY c.id ORDER BY max(s.id) DESC",
        )
        return [ChatRef(row[0], row[1]) for row in rows]


async def _load(connection: Connection, segment_id: int, chat: ChatRef) -> Segment:
    row = await fetch_one(connection, "SELECT id, started_at, ended_at FROM segments WHERE id = %s", (segment_id,))
    if row is None:
        raise StorageError(f"segment {segment_id} does not exist")
    return _segment(chat, row[0], row[1], row[2])


def _segment(chat: ChatRef, segment_id: int, started_at: int, ended_at: int | None) -> Segment:
    return Segment(
        id=int(segment_id),
        chat=chat,
        started_at=from_millis(int(started_at)),
        ended_at=None if ended_at is None else from_millis(int(ended_at)),
    )
