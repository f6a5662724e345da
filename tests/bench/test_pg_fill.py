"""The PostgreSQL bench chat's bulk fill writes the rows the store's own append writes: the same messages
(segment, role, content, context, time), log lines, and segment count, so `klaw bench scale` on PostgreSQL
measures a chat a person's engine would have built."""

from __future__ import annotations

from typing import Any

from klaw.bench.corpus import BENCH_START, ZipfCorpus
from klaw.bench.pg_fill import append_conversation
from klaw.bench.turn_fill import TurnFill
from klaw.store.postgres.connection import fetch_all
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef
from tests.conftest import new_database
from tests.pg_server import PgServer

CHAT = ChatRef("bench", "scale")
VARIABLE = "KLAW_TEST_DATABASE_URL"


async def _rows(store: PostgresStore) -> dict[str, Any]:
    async with store.db.connection() as connection:
        return {
            "messages": await fetch_all(
                connection,
                "SELECT rowid, id, channel, chat_id, segment_id, role, type, content, metadata, created_at, context,"
                " search FROM messages ORDER BY rowid",
            ),
            "log": await fetch_all(connection, "SELECT id, chat, created_at, line FROM log_records ORDER BY id"),
            "segments": await fetch_all(connection, "SELECT id, chat, conversation_messages FROM segments"),
        }


async def test_bulk_fill_writes_what_append_many_writes(postgres_server: PgServer) -> None:
    records = ZipfCorpus(seed=3).chat_records(CHAT, 0, 30, BENCH_START)
    appended = await PostgresStore.open(postgres_server.dsn(new_database(postgres_server)), variable=VARIABLE)
    bulk = await PostgresStore.open(postgres_server.dsn(new_database(postgres_server)), variable=VARIABLE)
    try:
        first = await appended.messages.append_many(records[:12])
        rest = await appended.messages.append_many(records[12:])
        rowids = await append_conversation(bulk, records[:12]) + await append_conversation(bulk, records[12:])

        assert rowids == [s.rowid for s in first + rest]
        assert await _rows(bulk) == await _rows(appended)

        # `klaw bench turn`'s fill writes turns (decision 434): each question's exchange records and summary
        # among the messages. In bulk they make the rows the store's own append and folds make: exchanges,
        # summaries and their embedding jobs, the replies waiting to be shown.
        fill = TurnFill(CHAT, BENCH_START, 1)
        batches = [fill.batch(12)[0], fill.batch(7)[0]]  # the second ends with a question left unanswered
        stored = [await appended.messages.append_many(batch) for batch in batches]
        turns = [await append_conversation(bulk, batch) for batch in batches]

        assert turns == [[s.rowid for s in batch] for batch in stored]
        assert await _rows(bulk) == await _rows(appended)
        folded = {name: await _all(bulk, sql) for name, sql in FOLDS.items()}
        assert folded == {name: await _all(appended, sql) for name, sql in FOLDS.items()}
        assert len(folded["exchanges"]) == 10 and [row[5] for row in folded["exchanges"]].count("failed") == 1
        assert len(folded["summaries"]) == 9 + 1  # nine exchanges answered and the segment's rolling summary
    finally:
        await appended.aclose()
        await bulk.aclose()


FOLDS = {
    "exchanges": "SELECT id, chat, segment_id, started_at, ended_at, status, user_message_rowid, final_message_rowid"
    " FROM exchanges ORDER BY id",
    "summaries": "SELECT id, kind, chat, segment_id, exchange_id, text, model, final, covers_exchange_id,"
    " exchanges_covered, created_at, record_rowid FROM summaries ORDER BY id",
    "summary_records": "SELECT rowid, segment_id, exchange_id FROM summary_records ORDER BY rowid",
    "undelivered": "SELECT message_rowid, exchange_id FROM undelivered_replies ORDER BY message_rowid",
    "jobs": "SELECT target, target_rowid, status FROM embedding_jobs ORDER BY target, target_rowid",
    "marks": "SELECT name, high FROM id_marks ORDER BY name",
}


async def _all(store: PostgresStore, sql: str) -> list[Any]:
    async with store.db.connection() as connection:
        return await fetch_all(connection, sql)
