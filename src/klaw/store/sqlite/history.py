"""Which stored records make up an exchange or a segment: for `fetch_conversation_details` and `/forget`.

Messages carry no exchange id, so an exchange's records are found from what its log records say:

- its user messages: the chat's user text after the previous exchange's user message, up to and
  including the one the exchange answers (a burst within the debounce is one turn);
- its turn: every record from its `exchange_open` record to its `exchange_close` record (or, while
  open, to the next `exchange_open`), except user messages (typed mid-turn, they belong to the next
  exchange) and `/new` and `/model` records (commands, not part of the turn). The engine runs one turn
  at a time per chat and injects other messages only between turns, so nothing else lands there.

A segment's records are all of its rows except `/new` and `/model` records, which shape the chat's
segments and models and hold no text. Summary records are in neither: the summarizers append them in
the background, in the middle of a later turn or segment; `summary_records` finds those about an
exchange (`/forget` erases them with it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from klaw.store.records import ChatRef, MessageType, Role, StoredMessage
from klaw.store.shared.reads import NOT_STRUCTURE, HistoryReads
from klaw.store.shared.record_kinds import user_message_sql
from klaw.store.shared.rows import MESSAGE_COLUMNS, message_from_row
from klaw.store.sqlite.archival_fold import checkpoint_truncate, summary_records_for
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.query import fetch_all, fetch_one, fetch_value


def exchange_rowids(connection: apsw.Connection, exchange_id: int) -> list[int] | None:
    """The rowids of an exchange's records in order (None: no such exchange)."""
    row = fetch_one(
        connection,
        "SELECT chat, started_at, user_message_rowid, final_message_rowid FROM exchanges WHERE id = ?",
        (exchange_id,),
    )
    if row is None:
        return None
    chat_key, started_at, user_rowid, final_rowid = row
    found: set[int] = set()
    if user_rowid is not None:
        previous = fetch_value(
            connection,
            "SELECT max(user_message_rowid) FROM exchanges WHERE chat = ? AND user_message_rowid < ?",
            (chat_key, user_rowid),
        )
        found.update(
            int(r[0])
            for r in fetch_all(
                connection,
                f"SELECT m.rowid FROM messages m WHERE m.chat = ? AND {user_message_sql()}"
                " AND m.rowid > ? AND m.rowid <= ?",
                (chat_key, previous or 0, user_rowid),
            )
        )
    opened = fetch_one(
        connection,
        "SELECT m.rowid, m.id FROM messages m WHERE m.chat = ? AND m.type = ? AND m.created_at = ?"
        " AND json_extract(m.metadata, '$.user_message_id') IS (SELECT id FROM messages WHERE rowid = ?)"
        " ORDER BY m.rowid DESC LIMIT 1",
        (chat_key, MessageType.EXCHANGE_OPEN.value, started_at, user_rowid),
    )
    if opened is not None:
        first, last = int(opened[0]), _turn_end(connection, chat_key, int(opened[0]), str(opened[1]), started_at)
    elif user_rowid is not None and final_rowid is not None:
        first, last = int(user_rowid) + 1, int(final_rowid)  # no opening record stored: user message to reply
    else:
        first, last = 0, -1
    found.update(
        int(r[0])
        for r in fetch_all(
            connection,
            # `+m.chat`: by rowid (the turn's rows), not by the chat index (every row of the chat)
            f"SELECT m.rowid FROM messages m WHERE +m.chat = ? AND m.rowid BETWEEN ? AND ? AND m.role != ?"
            f" AND {NOT_STRUCTURE}",
            (chat_key, first, last, Role.USER.value),
        )
    )
    return sorted(found)


def _turn_end(connection: apsw.Connection, chat_key: int, open_rowid: int, open_id: str, started_at: int) -> int:
    closed = fetch_value(
        connection,
        "SELECT min(rowid) FROM messages WHERE chat = ? AND type = ? AND created_at >= ?"
        " AND json_extract(metadata, '$.opened') = ?",
        (chat_key, MessageType.EXCHANGE_CLOSE.value, started_at, open_id),
    )
    if closed is not None:
        return int(closed)
    following = fetch_value(
        connection,
        "SELECT rowid FROM messages WHERE +chat = ? AND type = ? AND rowid > ? ORDER BY rowid LIMIT 1",
        (chat_key, MessageType.EXCHANGE_OPEN.value, open_rowid),
    )
    return int(following) - 1 if following is not None else 2**62


def _messages(connection: apsw.Connection, rowids: Sequence[int]) -> list[StoredMessage]:
    if not rowids:
        return []
    rows = fetch_all(
        connection,
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid IN (SELECT value FROM json_each(?)) ORDER BY m.rowid",
        (f"[{','.join(str(r) for r in rowids)}]",),
    )
    return [message_from_row(row) for row in rows]


def exchange_messages_in(connection: apsw.Connection, exchange_id: int) -> list[StoredMessage] | None:
    """`SqliteHistory.exchange_messages` on the caller's connection (the summaries' scan reads them too)."""
    rowids = exchange_rowids(connection, exchange_id)
    return None if rowids is None else _messages(connection, rowids)


class SqliteHistory(HistoryReads[SqliteDatabase, ChatKeys]):
    async def exchange_messages(self, exchange_id: int) -> list[StoredMessage] | None:
        """Every stored record of the exchange (control records included), oldest first; None when
        there is no such exchange."""
        return await self._db.read(
            lambda connection: exchange_messages_in(connection, exchange_id)
        )  # beside the writes: the summarizers read each exchange (decision 216)

    async def summary_records(self, chat: ChatRef, record_ids: Sequence[str]) -> list[StoredMessage]:
        """The summary records of the chat that forgetting `record_ids` makes obsolete, oldest first."""

        def query(connection: apsw.Connection) -> list[StoredMessage]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            return _messages(connection, summary_records_for(connection, chat_key, record_ids))

        return await self._db.run(query)

    async def exchange_ids(self, messages: Sequence[StoredMessage]) -> dict[int, int]:
        """message rowid → the exchange it belongs to, for user messages and final replies (messages
        not yet answered, or outside any exchange, are left out)."""
        if not messages:
            return {}

        def query(connection: apsw.Connection) -> dict[int, int]:
            found: dict[int, int] = {}
            for message in messages:
                chat_key = self._chats.find(connection, message.record.chat)
                if chat_key is None:
                    continue
                if message.role is Role.USER:
                    sql = (
                        "SELECT id FROM exchanges WHERE chat = ? AND user_message_rowid >= ?"
                        " ORDER BY user_message_rowid, id DESC LIMIT 1"  # the last: a crash cut earlier ones off
                    )
                else:
                    sql = "SELECT id FROM exchanges WHERE chat = ? AND final_message_rowid = ? ORDER BY id LIMIT 1"
                exchange_id = fetch_value(connection, sql, (chat_key, message.rowid))
                if exchange_id is not None:
                    found[message.rowid] = int(exchange_id)
            return found

        return await self._db.run(query)

    async def tool_rounds(self, chat: ChatRef, tool_name: str) -> list[list[StoredMessage]]:
        """Each of the chat's tool-call records that calls `tool_name`, followed by the tool results
        answering its calls (the round a model asked for), oldest first."""

        def query(connection: apsw.Connection) -> list[list[StoredMessage]]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            calls = fetch_all(
                connection,
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.chat = ? AND m.type = ? AND EXISTS"
                " (SELECT 1 FROM json_each(m.metadata, '$.tool_calls') WHERE json_extract(value, '$.name') = ?)"
                " ORDER BY m.rowid",
                (chat_key, MessageType.TOOL_CALL.value, tool_name),
            )
            rounds = []
            for row in calls:
                call = message_from_row(row)
                ids = [c.get("id") for c in (call.record.metadata or {}).get("tool_calls", []) if isinstance(c, dict)]
                results = fetch_all(
                    connection,
                    f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.chat = ? AND m.type = ? AND m.rowid > ?"
                    " AND json_extract(m.metadata, '$.tool_call_id') IN (SELECT value FROM json_each(?))"
                    " ORDER BY m.rowid",
                    (chat_key, MessageType.TOOL_RESULT.value, call.rowid, json.dumps([i for i in ids if i])),
                )
                rounds.append([call, *(message_from_row(r) for r in results)])
            return rounds

        return await self._db.run(query)

    async def checkpoint(self) -> None:
        """Empty the WAL into the database file (after a forget: old pages leave the WAL)."""
        await self._db.run(checkpoint_truncate)
