"""Filling a PostgreSQL bench chat in bulk: one statement per batch instead of ~10 per message.

The store's append decides each message's segment and `context` one message at a time, under the
chat's lock, with a round trip per step: about 100 messages a second on the shared 2-CPU test machine,
so a 1M-message chat would take hours. A bench chat is plain conversation text appended in order to
the open segment, for which those steps reduce to: the open segment once, each message's `context`
the previous message's text and its `following` the next one's (the segment's last message before
the batch followed by the first), its log line, and no folds (plain text folds nothing). This writes
exactly those rows, in one `INSERT … SELECT FROM unnest(…)` per table and batch, under the same lock;
tests/bench/test_pg_fill.py checks that the rows equal what `append_many` writes.

The turn bench's fill (`turn_fill.py`, decision 434) writes a chat as turns leave it: its exchanges'
`exchange_open` / `exchange_close` records and their summaries among the messages. Those rows go in the
same statement (a control record has no `context` or `following`, and is skipped by its neighbours'),
and each control record is then folded by the store's own folds (`exchanges`, `summaries`), in record
order, in the same transaction: a few round trips a record, ~1 minute for a 100,000-message chat.
"""

from __future__ import annotations

from collections.abc import Sequence

from klaw.store.log_format import encode_record
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, clean_text, execute, fetch_all, fetch_one
from klaw.store.postgres.folds import fold_exchange_record
from klaw.store.postgres.segments import lock_chat, open_segment_id
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import MessageRecord, MessageType, to_millis, utc_now
from klaw.store.shared.record_kinds import conversation_sql
from klaw.store.shared.rows import message_values
from klaw.store.summaries.postgres.fold import fold_summary_record

# Control records a bench fill writes beside the conversation: its turns' exchanges and summaries.
FOLDED = frozenset(
    {MessageType.EXCHANGE_OPEN, MessageType.EXCHANGE_CLOSE, MessageType.EXCHANGE_SUMMARY, MessageType.SEGMENT_SUMMARY}
)


async def append_conversation(store: PostgresStore, records: Sequence[MessageRecord]) -> list[int]:
    """Append plain conversation messages of one chat, in order, with their exchanges' and summaries'
    control records (`FOLDED`) among them; returns their rowids."""
    if not records:
        return []
    chat = records[0].chat
    if any(
        r.chat != chat or not (r.type in FOLDED or (r.type is MessageType.TEXT and r.is_conversation)) for r in records
    ):
        raise ValueError("a bulk fill takes plain conversation text of one chat, and its exchanges and summaries")
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
        ids, roles, types, contents, metadata, created = ([v[i] for v in values] for i in (0, 5, 6, 7, 8, 9))
        context, following = _neighbours(records, contents, None if last is None else last[1])
        said = [c for r, c in zip(records, contents, strict=True) if r.is_conversation]
        if last is not None and said:
            await execute(connection, "UPDATE messages SET following = %s WHERE rowid = %s", (said[0], last[0]))
        rows = await fetch_all(
            connection,
            "INSERT INTO messages (id, channel, chat_id, chat, segment_id, role, type, content, metadata,"
            " created_at, context, following) SELECT r.id, %s, %s, %s, %s, r.role, r.type, r.content, r.metadata,"
            " r.created_at, r.context, r.following FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[],"
            " %s::text[], %s::bigint[], %s::text[], %s::text[])"
            " WITH ORDINALITY AS r(id, role, type, content, metadata, created_at, context, following, n) ORDER BY r.n"
            " RETURNING rowid",
            (
                chat.channel,
                chat.chat_id,
                chat_key,
                segment_id,
                ids,
                roles,
                types,
                contents,
                metadata,
                created,
                context,
                following,
            ),
        )
        await fetch_all(
            connection,
            "INSERT INTO log_records (id, chat, created_at, line) SELECT r.id, %s, r.created_at, r.line"
            " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS r(id, created_at, line) RETURNING id",
            (chat_key, ids, created, [encode_record(r) for r in records]),
        )
        rowids = sorted(int(row[0]) for row in rows)
        await _fold(connection, records, rowids, chat_key, segment_id)
    return rowids


def _neighbours(
    records: Sequence[MessageRecord], contents: Sequence[str], before: str | None
) -> tuple[list[str | None], list[str | None]]:
    """Each record's `context` (the previous conversation message's text) and `following` (the next
    one's), as the store's append leaves them: a control record has neither and is skipped by both."""
    context: list[str | None] = []
    previous = before
    for record, content in zip(records, contents, strict=True):
        context.append(previous if record.is_conversation else None)
        previous = content if record.is_conversation else previous
    following: list[str | None] = []
    after: str | None = None
    for record, content in zip(reversed(records), reversed(contents), strict=True):
        following.append(after if record.is_conversation else None)
        after = content if record.is_conversation else after
    return context, following[::-1]


async def _fold(
    connection: Connection,
    records: Sequence[MessageRecord],
    rowids: Sequence[int],
    chat_key: int,
    segment_id: int,
) -> None:
    """The store's folds of the control records just inserted, in order (an exchange opened before its
    close and its summary, a segment summary after the exchanges it covers)."""
    now = to_millis(utc_now())
    for record, rowid in zip(records, rowids, strict=True):
        if record.type in FOLDED:
            created = to_millis(record.created_at)
            await fold_exchange_record(connection, record, chat_key, segment_id, rowid, created)
            await fold_summary_record(connection, record, chat_key, rowid, created, now)


async def analyze(store: PostgresStore) -> None:
    """Gather the planner's statistics of the tables just filled, as autovacuum does in a running home
    within a minute of such growth. Without them the planner takes a table filled in bulk for empty (a
    row or two a segment) and a turn's searches read a whole segment where an index reads a few rows
    (decision 424: a turn's p50 at 1,000 stored messages 200 ms against ~40 ms on SQLite)."""
    async with store.db.connection() as connection:
        # The bench's own tables (first on its search path), never the rest of a person's database.
        await execute(connection, "ANALYZE chats, segments, messages, log_records")
