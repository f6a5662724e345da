"""The PostgreSQL bench chat's bulk fill writes the rows the store's own append writes: the same messages
(segment, role, content, context, time), log lines, and segment count, so `klaw bench scale` on PostgreSQL
measures a chat a person's engine would have built."""

from __future__ import annotations

from typing import Any

from klaw.bench.corpus import BENCH_START, ZipfCorpus
from klaw.bench.pg_fill import append_conversation
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
    finally:
        await appended.aclose()
        await bulk.aclose()
