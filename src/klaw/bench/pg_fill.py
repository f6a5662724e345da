"""Filling a PostgreSQL bench chat in bulk: one statement per batch instead of ~10 per message.

The store's append decides each message's segment and `context` one message at a time, under the
chat's lock, with a round trip per step: about 100 messages a second on the shared 2-CPU test machine,
so a 1M-message chat would take hours. A bench chat is plain conversation text appended in order to
the open segment, for which those steps reduce to: the open segment once, each message's `context`
the previous message's text and its `following` the next one's (the segment's last message before
the batch followed by the first), its log line, and no folds (plain text folds nothing). This writes
exactly those rows, in one `INSERT … SELECT FROM unnest(…)` per table and batch, under the same lock;
tests/bench/test_pg_fill.py checks that the rows equal what `append_many` writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from klaw.store.log_format import encode_record
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import clean_text, execute, fetch_all, fetch_one
from klaw.store.postgres.segments import lock_chat, open_segment_id
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import MessageRecord, MessageType, to_millis
from klaw.store.shared.record_kinds import conversation_sql
from klaw.store.shared.rows import message_values


async def append_conversation(store: PostgresStore, records: Sequence[MessageRecord]) -> list[int]:
    """Append plain conversation messages of one chat, in order; returns their rowids."""
    if not records:
        return []
    chat = records[0].chat
    if any(r.chat != chat or r.type is not MessageType.TEXT or not r.is_conversation for r in records):
        raise ValueError("a bulk fill takes plain conversation text of one chat only")
    async with store.db.transaction() as connection:
        chat_key = await ChatKeys().ensure(connection, chat)
        await lock_chat(connection, chat_key)
        segment_id = await open_segment_id(connection, chat_key, to_millis(records[0].created_at))
        last = await fetch_one(
            connection,
            f"SELECT m.rowid, m.content FROM messages m WHERE m.segment_id = %s AND {conversation_sql()}"
            " ORDER BY m.rowid DESC LIMIT 1",
            (segment_id,),
        )
        values = [message_values(r, chat_key, segment_id, clean_text) for r in records]
        ids, roles, contents, metadata, created = ([v[i] for v in values] for i in (0, 5, 7, 8, 9))
        if last is not None:
            await execute(connection, "UPDATE messages SET following = %s WHERE rowid = %s", (contents[0], last[0]))
        rows = await fetch_all(
            connection,
            "INSERT INTO messages (id, channel, chat_id, chat, segment_id, role, type, content, metadata,"
            " created_at, context, following) SELECT r.id, %s, %s, %s, %s, r.role, %s, r.content, r.metadata,"
            " r.created_at, r.context, r.following FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[],"
            " %s::bigint[], %s::text[], %s::text[])"
            " WITH ORDINALITY AS r(id, role, content, metadata, created_at, context, following, n) ORDER BY r.n"
            " RETURNING rowid",
            (
                chat.channel,
                chat.chat_id,
                chat_key,
                segment_id,
                MessageType.TEXT.value,
                ids,
                roles,
                contents,
                metadata,
                created,
                [None if last is None else last[1], *contents[:-1]],
                [*contents[1:], None],
            ),
        )
        await fetch_all(
            connection,
            "INSERT INTO log_records (id, chat, created_at, line) SELECT r.id, %s, r.created_at, r.line"
            " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS r(id, created_at, line) RETURNING id",
            (chat_key, ids, created, [encode_record(r) for r in records]),
        )
    return sorted(int(row[0]) for row in rows)


async def analyze(store: PostgresStore) -> None:
    """Gather the planner's statistics of the tables just filled, as autovacuum does in a running home
    within a minute of such growth. Without them the planner takes a table filled in bulk for empty (a
    row or two a segment) and a turn's searches read a whole segment where an index reads a few rows
    (decision 424: a turn's p50 at 1,000 stored messages 200 ms against ~40 ms on SQLite)."""
    async with store.db.connection() as connection:
        # The bench's own tables (first on its search path), never the rest of a person's database.
        await execute(connection, "ANALYZE chats, segments, messages, log_records")
