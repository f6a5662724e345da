"""Reads whose SQL is the same on both backends but for its placeholders, written once (with SQLite's
`?`) and inherited by each backend's repository, which gives its database (`rows`: one read), its
chat keys (`rows` of one chat: nothing for a chat never stored) and its dialect (`dialect`: SQLite's
unless a PostgreSQL repository sets `POSTGRES`). A read whose SQL differs in more than its
placeholders stays in its backend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from klaw.store.records import (
    ChatRef,
    Exchange,
    ExchangeStatus,
    MessageType,
    SessionState,
    StoredMessage,
    UndeliveredReply,
    from_millis,
    to_millis,
)
from klaw.store.shared.dialect import SQLITE, Dialect
from klaw.store.shared.record_kinds import not_control_sql, user_message_sql
from klaw.store.shared.rows import EXCHANGE_COLUMNS, MESSAGE_COLUMNS, Row, exchange_from_row, message_from_row
from klaw.store.summaries.log_records import SUMMARY_RECORD_TYPES

ParamsOfChat = Callable[[int], Sequence[Any]]


class RowSource(Protocol):
    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    async def read_rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...


class ChatRowSource(Protocol):
    async def rows(self, db: Any, chat: ChatRef, sql: str, params: ParamsOfChat) -> list[Row]: ...


_STRUCTURE = (MessageType.SESSION_BREAK, MessageType.MODEL_SWITCH, *SUMMARY_RECORD_TYPES)
# Every record of a segment but its `/new`, `/model` and summary records.
NOT_STRUCTURE = "m.type NOT IN (" + ", ".join(f"'{t.value}'" for t in _STRUCTURE) + ")"
# The exchange states that answered nothing: running, or cut off by a crash (decision 306).
_NOT_ANSWERED = f"'{ExchangeStatus.OPEN.value}', '{ExchangeStatus.INTERRUPTED.value}'"
_EXCHANGES = f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"


DB = TypeVar("DB", bound=RowSource)
CK = TypeVar("CK", bound=ChatRowSource)


class SharedReads(Generic[DB, CK]):
    """A repository's database and chat keys, and its backend's dialect (a class attribute), for the
    reads below."""

    dialect: ClassVar[Dialect] = SQLITE

    def __init__(self, db: DB, chats: CK) -> None:
        self._db = db
        self._chats = chats

    async def _read(self, sql: str, params: Sequence[Any]) -> list[Row]:
        return await self._db.rows(self.dialect.sql(sql), params)

    async def _read_beside(self, sql: str, params: Sequence[Any]) -> list[Row]:
        """`_read` on a read connection that never waits behind the writes (decision 216): for a read
        that sees what was committed when it starts and keeps nothing of the writer's."""
        return await self._db.read_rows(self.dialect.sql(sql), params)

    async def _read_chat(self, chat: ChatRef, sql: str, params: ParamsOfChat) -> list[Row]:
        return await self._chats.rows(self._db, chat, self.dialect.sql(sql), params)


class MessageReads(SharedReads[DB, CK]):
    async def window(self, segment_id: int, limit: int) -> list[StoredMessage]:
        rows = await self._read_beside(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.segment_id = ? AND {not_control_sql()}"
            " ORDER BY m.rowid DESC LIMIT ?",
            (segment_id, limit),
        )
        return [message_from_row(row) for row in reversed(rows)]

    async def user_messages_after(self, segment_id: int, rowid: int) -> list[StoredMessage]:
        rows = await self._read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.segment_id = ? AND m.rowid > ?"
            f" AND {user_message_sql()} ORDER BY m.rowid",
            (segment_id, rowid),
        )
        return [message_from_row(row) for row in rows]

    async def unanswered(self) -> list[StoredMessage]:
        """Every chat's user text messages of its open segment stored after the one its last closed
        exchange answered (open and interrupted exchanges answered nothing), in one read: what a crash
        left unanswered, found at start without a query per chat (decision 477). Oldest first per chat,
        the chats of the newest segments first, as resuming read them one chat at a time before."""
        rows = await self._read(
            f"SELECT {MESSAGE_COLUMNS} FROM segments s JOIN messages m ON m.segment_id = s.id"
            " WHERE s.ended_at IS NULL"
            " AND s.id = (SELECT max(o.id) FROM segments o WHERE o.chat = s.chat AND o.ended_at IS NULL)"
            " AND m.rowid > coalesce((SELECT max(coalesce(e.user_message_rowid, 0)) FROM exchanges e"
            f" WHERE e.segment_id = s.id AND e.status NOT IN ({_NOT_ANSWERED})), 0)"
            f" AND {user_message_sql()} ORDER BY s.id DESC, m.rowid",
            (),
        )
        return [message_from_row(row) for row in rows]

    async def known_ids(self, chat: ChatRef, since: datetime) -> set[str]:
        sql = "SELECT id FROM messages WHERE chat = ? AND created_at >= ?"
        return {str(row[0]) for row in await self._read_chat(chat, sql, lambda key: (key, to_millis(since)))}

    async def latest_created_at(self, chat: ChatRef) -> datetime | None:
        found = await self._read_chat(chat, "SELECT max(created_at) FROM messages WHERE chat = ?", lambda key: (key,))
        return None if not found or found[0][0] is None else from_millis(int(found[0][0]))


class SessionReads(SharedReads[DB, CK]):
    async def get(self, chat: ChatRef) -> SessionState | None:
        sql = "SELECT model, updated_at FROM sessions WHERE chat = ?"
        found = await self._read_chat(chat, sql, lambda key: (key,))
        return SessionState(chat, found[0][0], from_millis(int(found[0][1]))) if found else None


class ExchangeReads(SharedReads[DB, CK]):
    async def get(self, exchange_id: int) -> Exchange | None:
        found = await self._read(f"{_EXCHANGES} WHERE e.id = ?", (exchange_id,))
        return exchange_from_row(found[0]) if found else None

    async def for_segment(self, segment_id: int) -> list[Exchange]:
        rows = await self._read_beside(f"{_EXCHANGES} WHERE e.segment_id = ? ORDER BY e.id", (segment_id,))
        return [exchange_from_row(row) for row in rows]

    async def undelivered(self) -> list[UndeliveredReply]:
        rows = await self._read(
            f"SELECT {MESSAGE_COLUMNS}, (SELECT id FROM messages WHERE rowid = e.user_message_rowid)"
            " FROM undelivered_replies u JOIN messages m ON m.rowid = u.message_rowid"
            " LEFT JOIN exchanges e ON e.id = u.exchange_id ORDER BY u.message_rowid",
            (),
        )
        return [UndeliveredReply(message_from_row(row).record, row[10]) for row in rows]


class HistoryReads(SharedReads[DB, CK]):
    async def segment_messages(self, segment_id: int) -> list[StoredMessage]:
        """Every stored record of the segment except `/new`, `/model` and summary records, oldest first."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.segment_id = ? AND {NOT_STRUCTURE} ORDER BY m.rowid"
        return [message_from_row(row) for row in await self._read(sql, (segment_id,))]

    async def latest_exchange_id(self, chat: ChatRef) -> int | None:
        """The chat's most recent exchange (for `/forget last`)."""
        found = await self._read_chat(chat, "SELECT max(id) FROM exchanges WHERE chat = ?", lambda key: (key,))
        return None if not found or found[0][0] is None else int(found[0][0])
