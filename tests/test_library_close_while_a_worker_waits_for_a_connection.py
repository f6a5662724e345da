"""Closing a library engine on PostgreSQL while one summarizer holds the pool's connection and the other waits
for it (decision 428). Stopping the first returns its connection, which the pool hands to the second in the
same loop pass as the second's cancellation arrives: psycopg_pool waits for a connection with Python 3.11's
`asyncio.wait_for`, which then returns the connection and drops the cancellation. The second summarizer went
on, rested, and `aclose` (like Ctrl-C at `klaw engine` or `klaw bench turn`) waited for it forever.

Held by hooks, not timing: the exchange summarizer's scan holds the one connection (`poolSize: 1`) until it
is cancelled, and the close starts once the segment summarizer waits in the pool's queue."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw
from klaw.store.postgres.store import PostgresStore
from klaw.store.summaries.postgres.repository import PostgresSummaries
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_STOP_URL"
CLOSE_BOUND_S = 30.0  # a generous bound on the close: it took well under a second when it did not hang


def _answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
    return "fine"


async def test_close_stops_a_summarizer_handed_a_connection_as_it_is_cancelled(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    armed, holding, asking = False, asyncio.Event(), asyncio.Event()
    scan, segment_work = PostgresSummaries.scan_exchanges, PostgresSummaries.segment_work

    async def scan_holding_the_connection(
        self: PostgresSummaries, after_id: int, recheck: Collection[int], limit: int
    ) -> object:
        if not armed:
            return await scan(self, after_id, recheck, limit)
        async with self._db.connection():
            holding.set()
            await asyncio.Event().wait()  # until the close cancels the exchange summarizer
        raise AssertionError("unreachable")

    async def segment_work_asking(self: PostgresSummaries, **kwargs: Any) -> object:
        if armed:
            asking.set()  # seen once this task waits: nothing before the pool's queue lets the loop run
        return await segment_work(self, **kwargs)

    monkeypatch.setattr(PostgresSummaries, "scan_exchanges", scan_holding_the_connection)
    monkeypatch.setattr(PostgresSummaries, "segment_work", segment_work_asking)
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "database": {"backend": "postgres", "urlEnv": VARIABLE, "poolSize": 1},
    }
    agent = Klaw(tmp_path / "home", config=config, model=FunctionModel(_answer))
    await agent.start()
    engine = agent.engine
    summarizer, store = engine.summarizer, engine.store
    assert summarizer is not None and isinstance(store, PostgresStore)
    await engine.embedding_queue.wait_idle()
    await summarizer.wait_idle()

    armed = True
    summarizer.exchanges.notify()
    await asyncio.wait_for(holding.wait(), CLOSE_BOUND_S)
    summarizer.segments.notify()  # it looks for work: its first store call waits for the held connection
    await asyncio.wait_for(asking.wait(), CLOSE_BOUND_S)
    assert store.db.pool.get_stats()["requests_waiting"] == 1

    async with asyncio.timeout(CLOSE_BOUND_S):
        await agent.aclose()

    assert not summarizer.running
