"""The probe a turn makes before each model call on PostgreSQL (was a forget stored since its message?) reads
the index, not the table, in the plan a prepared statement comes to reuse: with the forget's type bound as a
parameter that generic plan scanned every message of the table (decision 424: 35-70 ms a probe at 100,000
messages, several a turn)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from klaw.bench.corpus import BENCH_START
from klaw.bench.pg_fill import append_conversation
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.store import PostgresStore
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.conftest import new_database
from tests.pg_server import PgServer

CHAT = ChatRef("bench", "probe")


def at(n: int) -> datetime:
    return BENCH_START + timedelta(seconds=n)


async def test_the_forget_probe_reads_the_index_in_a_generic_plan(
    postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    store = await PostgresStore.open(dsn, variable="KLAW_TEST_DATABASE_URL")
    sent: list[tuple[str, tuple[Any, ...]]] = []
    value = ChatKeys.value

    async def recorded(self: ChatKeys, db: Any, chat: ChatRef, sql: str, params: Any) -> Any:
        sent.append((sql, tuple(params(1))))
        return await value(self, db, chat, sql, params)

    monkeypatch.setattr(ChatKeys, "value", recorded)
    try:
        records = [
            MessageRecord(CHAT, Role(("user", "assistant")[n % 2]), f"message {n}", created_at=at(n))
            for n in range(3000)
        ]
        await append_conversation(store, records)
        assert store.leases is not None
        assert await store.leases.forgotten_after(CHAT, 2990) is False
    finally:
        await store.aclose()

    ((sql, params),) = sent
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub("%s", lambda _: f"${next(numbered)}", sql)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("ANALYZE messages")
        connection.execute("SET plan_cache_mode = force_generic_plan")
        connection.execute(f"PREPARE probe AS {prepared}".encode())
        arguments = ", ".join(f"'{p}'" for p in params)
        plan = "\n".join(str(row[0]) for row in connection.execute(f"EXPLAIN EXECUTE probe({arguments})".encode()))
    assert "messages_by_chat_type" in plan and "Seq Scan" not in plan, plan
