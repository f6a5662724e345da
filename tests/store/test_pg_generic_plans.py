"""Statements of the PostgreSQL store that psycopg keeps prepared read the index made for them in the
generic plan PostgreSQL comes to reuse, whatever the chat or segment they ask about (decision 427).

Each test records the statement the store sends (through psycopg), prepares it again with
`plan_cache_mode = force_generic_plan` and asserts the plan's shape: the old statements walked the
primary key back from the newest message, through every other chat's messages (the window of a quiet
chat, the first message of a chat with no open segment, the end of a turn not yet closed), which at
100,000 messages took 40-150 ms where the index answers in well under a millisecond."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from klaw.bench.corpus import BENCH_START
from klaw.bench.pg_fill import append_conversation
from klaw.store.postgres import history
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef, MessageRecord, Role, to_millis
from tests.conftest import new_database
from tests.pg_server import PgServer

BIG = ChatRef("bench", "big")
QUIET = ChatRef("bench", "quiet")
NEW = ChatRef("bench", "new")


def at(n: int) -> datetime:
    return BENCH_START + timedelta(seconds=n)


def conversation(chat: ChatRef, count: int, start: int = 0) -> list[MessageRecord]:
    return [
        MessageRecord(chat, Role(("user", "assistant")[n % 2]), f"message {n}", created_at=at(start + n))
        for n in range(count)
    ]


class Sent:
    """Every statement the store's connections run, with its parameters."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def matching(self, part: str) -> tuple[str, tuple[Any, ...]]:
        found = [s for s in self.statements if part in s[0]]
        assert found, f"no statement with {part!r} was sent"
        return found[-1]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    recorded = Sent()
    execute = psycopg.AsyncConnection.execute

    async def recording(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str):
            recorded.statements.append((query, tuple(params or ())))
        return await execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", recording)
    return recorded


def generic_plan(dsn: str, statement: tuple[str, tuple[Any, ...]]) -> str:
    """EXPLAIN of `statement` prepared, in the generic plan (its parameters as a prepared statement's)."""
    sql, params = statement
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub("%s", lambda _: f"${next(numbered)}", sql)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("ANALYZE")
        connection.execute("SET plan_cache_mode = force_generic_plan")
        connection.execute(f"PREPARE probe AS {prepared}".encode())
        arguments = ", ".join("NULL" if p is None else f"'{p}'" for p in params)
        explained = f"EXPLAIN EXECUTE probe({arguments})" if params else "EXPLAIN EXECUTE probe"
        rows = connection.execute(explained.encode()).fetchall()
        return "\n".join(str(row[0]) for row in rows)


@pytest.fixture
async def filled(postgres_server: PgServer) -> tuple[str, PostgresStore]:
    """A quiet chat of a few messages, then a chat of 3,000 after it: the quiet chat's rows are the oldest."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    store = await PostgresStore.open(dsn, variable="KLAW_TEST_DATABASE_URL")
    await append_conversation(store, conversation(QUIET, 6))
    await append_conversation(store, conversation(BIG, 3000, start=10))
    return dsn, store


async def test_a_quiet_chats_window_reads_its_segment_down_the_index(
    filled: tuple[str, PostgresStore], sent: Sent
) -> None:
    dsn, store = filled
    try:
        segment = await store.segments.current(QUIET)
        window = await store.messages.window(segment.id, 40)
        assert [m.record.content for m in window] == [f"message {n}" for n in range(6)]
        big = await store.segments.current(BIG)
        assert [m.record.content for m in await store.messages.window(big.id, 3)] == [
            "message 2997",
            "message 2998",
            "message 2999",
        ]
    finally:
        await store.aclose()
    plan = generic_plan(dsn, sent.matching("LIMIT %s"))
    assert "messages_by_segment" in plan and "messages_pkey" not in plan, plan


async def test_a_new_chats_first_message_reads_no_other_chats_rows(
    filled: tuple[str, PostgresStore], sent: Sent
) -> None:
    dsn, store = filled
    try:
        stored = await store.messages.append(conversation(NEW, 1, start=5000)[0])
        assert stored.record.content == "message 0"
    finally:
        await store.aclose()
    plan = generic_plan(dsn, sent.matching("LEFT JOIN LATERAL"))
    assert "messages_by_segment" in plan and "messages_pkey" not in plan, plan


async def test_the_end_of_a_turn_not_closed_is_looked_for_in_the_type_index(
    filled: tuple[str, PostgresStore], sent: Sent
) -> None:
    dsn, store = filled
    try:
        async with store.db.connection() as connection:
            chat_key = await ChatKeys().find(connection, BIG)
            assert chat_key is not None
            # an exchange opened at message 2990 and never closed: no close record, no later opening
            end = await history._turn_end(connection, chat_key, 2990, "no-such-opening", to_millis(at(2990)))
        assert end == 2**62
    finally:
        await store.aclose()
    for part in ("AND created_at >=", "AND rowid >"):
        plan = generic_plan(dsn, sent.matching(part))
        assert "messages_by_chat_type" in plan and "messages_pkey" not in plan, (part, plan)


async def test_a_searched_words_statements_are_planned_for_its_words_each_time(postgres_server: PgServer) -> None:
    """The idf count and the ranked match take a person's words: their best plan depends on how many rows hold
    each word (a rare word's few rows down the GIN index; a common one's count stopping at the cap), which a
    prepared statement's generic plan cannot know, so they are never kept prepared."""
    dsn = postgres_server.dsn(new_database(postgres_server))
    store = await PostgresStore.open(dsn, variable="KLAW_TEST_DATABASE_URL", pool_size=1)
    try:
        await append_conversation(store, conversation(BIG, 200))
        for _ in range(8):  # psycopg prepares a statement from its sixth run
            hits = await store.search.full_text(BIG, "message 17", limit=3)
            assert hits[0].message.record.content == "message 17"
        async with store.db.connection() as connection:
            cursor = await connection.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [str(row[0]) for row in await cursor.fetchall()]
    finally:
        await store.aclose()
    assert prepared, "psycopg kept none of the search's statements prepared: the test no longer tells"
    assert not [s for s in prepared if "AS held" in s or "ts_rank_cd" in s], prepared
