"""Which stored records make up an exchange or a segment, in PostgreSQL: the rules of
`store/sqlite/history.py` (its docstring explains them), with the same queries."""

from __future__ import annotations

from collections.abc import Sequence

from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, fetch_all, fetch_one, fetch_value
from klaw.store.postgres.folds import summary_records_for
from klaw.store.records import ChatRef, MessageType, Role, StoredMessage
from klaw.store.shared.dialect import POSTGRES
from klaw.store.shared.reads import NOT_STRUCTURE, HistoryReads
from klaw.store.shared.record_kinds import user_message_sql
from klaw.store.shared.rows import MESSAGE_COLUMNS, message_from_row

_NO_END = 2**62
# The record types these reads look for, written in the statements, never bound: psycopg keeps a statement
# prepared after a few runs, and PostgreSQL's generic plan for `type = $n` cannot tell a type few rows hold
# from one most do (at 100,000 messages the turn end's `min(rowid)` walked the whole primary key, 40-145 ms,
# where `messages_by_chat_type` answers in 0.1 ms: decision 427).
_OPEN = f"'{MessageType.EXCHANGE_OPEN.value}'"
_CLOSE = f"'{MessageType.EXCHANGE_CLOSE.value}'"
_TOOL_CALL = f"'{MessageType.TOOL_CALL.value}'"
_TOOL_RESULT = f"'{MessageType.TOOL_RESULT.value}'"


async def exchange_rowids(connection: Connection, exchange_id: int) -> list[int] | None:
    row = await fetch_one(
        connection,
        "SELECT chat, started_at, user_message_rowid, final_message_rowid FROM exchanges WHERE id = %s",
        (exchange_id,),
    )
    if row is None:
        return None
    chat_key, started_at, user_rowid, final_rowid = row
    found: set[int] = set()
    if user_rowid is not None:
        previous = await fetch_value(
            connection,
            "SELECT max(user_message_rowid) FROM exchanges WHERE chat = %s AND user_message_rowid < %s",
            (chat_key, user_rowid),
        )
        found.update(
            int(r[0])
            for r in await fetch_all(
                connection,
                f"SELECT m.rowid FROM messages m WHERE m.chat = %s AND {user_message_sql()}"
                " AND m.rowid > %s AND m.rowid <= %s",
                (chat_key, previous or 0, user_rowid),
            )
        )
    opened = await fetch_one(
        connection,
        f"SELECT m.rowid, m.id FROM messages m WHERE m.chat = %s AND m.type = {_OPEN} AND m.created_at = %s"
        " AND (m.metadata::json ->> 'user_message_id') IS NOT DISTINCT FROM"
        " (SELECT id FROM messages WHERE rowid = %s::bigint) ORDER BY m.rowid DESC LIMIT 1",
        (chat_key, started_at, user_rowid),
    )
    if opened is not None:
        first = int(opened[0])
        last = await _turn_end(connection, chat_key, first, str(opened[1]), started_at)
    elif user_rowid is not None and final_rowid is not None:
        first, last = int(user_rowid) + 1, int(final_rowid)
    else:
        first, last = 0, -1
    found.update(
        int(r[0])
        for r in await fetch_all(
            connection,
            f"SELECT m.rowid FROM messages m WHERE m.chat = %s AND m.rowid BETWEEN %s AND %s"
            f" AND m.role != '{Role.USER.value}' AND {NOT_STRUCTURE}",
            (chat_key, first, last),
        )
    )
    return sorted(found)


async def _turn_end(connection: Connection, chat_key: int, open_rowid: int, open_id: str, started_at: int) -> int:
    closed = await fetch_value(
        connection,
        f"SELECT min(rowid) FROM messages WHERE chat = %s AND type = {_CLOSE} AND created_at >= %s"
        " AND (metadata::json ->> 'opened') = %s",
        (chat_key, started_at, open_id),
    )
    if closed is not None:
        return int(closed)
    following = await fetch_value(
        connection,
        f"SELECT min(rowid) FROM messages WHERE chat = %s AND type = {_OPEN} AND rowid > %s",
        (chat_key, open_rowid),
    )
    return int(following) - 1 if following is not None else _NO_END


async def exchange_messages_in(connection: Connection, exchange_id: int) -> list[StoredMessage] | None:
    """`PostgresHistory.exchange_messages` on the caller's connection (the summaries' scan reads them too)."""
    rowids = await exchange_rowids(connection, exchange_id)
    return None if rowids is None else await _messages(connection, rowids)


async def _messages(connection: Connection, rowids: Sequence[int]) -> list[StoredMessage]:
    if not rowids:
        return []
    rows = await fetch_all(
        connection,
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid = ANY(%s) ORDER BY m.rowid",
        (list(rowids),),
    )
    return [message_from_row(row) for row in rows]


class PostgresHistory(HistoryReads[PostgresDatabase, ChatKeys]):
    dialect = POSTGRES

    async def exchange_messages(self, exchange_id: int) -> list[StoredMessage] | None:
        async with self._db.connection() as connection:
            return await exchange_messages_in(connection, exchange_id)

    async def summary_records(self, chat: ChatRef, record_ids: Sequence[str]) -> list[StoredMessage]:
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is None:
                return []
            return await _messages(connection, await summary_records_for(connection, chat_key, record_ids))

    async def exchange_ids(self, messages: Sequence[StoredMessage]) -> dict[int, int]:
        found: dict[int, int] = {}
        if not messages:
            return found
        async with self._db.connection() as connection:
            for message in messages:
                chat_key = await self._chats.find(connection, message.record.chat)
                if chat_key is None:
                    continue
                if message.role is Role.USER:
                    sql = (
                        "SELECT id FROM exchanges WHERE chat = %s AND user_message_rowid >= %s"
                        " ORDER BY user_message_rowid, id DESC LIMIT 1"  # the last: a crash cut earlier ones off
                    )
                else:
                    sql = "SELECT id FROM exchanges WHERE chat = %s AND final_message_rowid = %s ORDER BY id LIMIT 1"
                exchange_id = await fetch_value(connection, sql, (chat_key, message.rowid))
                if exchange_id is not None:
                    found[message.rowid] = int(exchange_id)
        return found

    async def tool_rounds(self, chat: ChatRef, tool_name: str) -> list[list[StoredMessage]]:
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is None:
                return []
            calls = await fetch_all(
                connection,
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.chat = %s AND m.type = {_TOOL_CALL} AND EXISTS"
                " (SELECT 1 FROM json_array_elements(CASE WHEN json_typeof(m.metadata::json -> 'tool_calls') = 'array'"
                " THEN m.metadata::json -> 'tool_calls' ELSE '[]'::json END) AS call WHERE call ->> 'name' = %s)"
                " ORDER BY m.rowid",
                (chat_key, tool_name),
            )
            rounds = []
            for row in calls:
                call = message_from_row(row)
                ids = [c.get("id") for c in (call.record.metadata or {}).get("tool_calls", []) if isinstance(c, dict)]
                results = await fetch_all(
                    connection,
                    f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.chat = %s AND m.type = {_TOOL_RESULT}"
                    " AND m.rowid > %s"
                    " AND (m.metadata::json ->> 'tool_call_id') = ANY(%s) ORDER BY m.rowid",
                    (chat_key, call.rowid, [str(i) for i in ids if i]),
                )
                rounds.append([call, *(message_from_row(r) for r in results)])
        return rounds

    async def checkpoint(self) -> None:
        """Nothing to do: a deleted row's text leaves PostgreSQL's files with VACUUM (autovacuum), not a
        checkpoint klaw could ask for; docs/postgres.md says what that means for `/forget`."""
