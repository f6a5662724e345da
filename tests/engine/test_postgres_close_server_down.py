"""Closing while the PostgreSQL server is down (decision 442): adversary23 closed `Klaw` with the server
stopped mid-turn and waited 120 s (the drain's 60 s, then more: every write waited `waitSeconds` for the
server), with a "Task exception was never retrieved" traceback per turn. A close now sees the server gone
and stops waiting for it: one line says so and what was kept, no traceback; the messages accepted before
are in the database, answered at the next start."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from klaw import AgentInfo, ChatMessage, FunctionModel, Klaw, TurnFailed
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


async def test_a_close_with_the_server_down_does_not_wait_for_it(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    monkeypatch.setenv(VARIABLE, dsn)
    caplog.set_level(logging.WARNING)
    thinking, go_on = asyncio.Event(), asyncio.Event()

    async def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        thinking.set()
        await go_on.wait()
        return "noted"

    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "processing": {"debounceMs": 0},
        # the default wait: the old close waited this long for each write
        "database": {"backend": "postgres", "urlEnv": VARIABLE, "waitSeconds": 30},
    }
    agent = Klaw(tmp_path / "home", config=config, model=FunctionModel(model))
    await agent.start()
    asking = asyncio.create_task(agent.ask("ana", "remember the blue door"))
    try:
        await asyncio.wait_for(thinking.wait(), 20)
        await asyncio.to_thread(postgres_server.pause)  # the server goes away while the model answers
        closing = asyncio.create_task(agent.aclose())
        go_on.set()
        async with asyncio.timeout(20):  # a safety net: the old close waited 30 s for the reply's write
            await closing
        with pytest.raises(TurnFailed, match=f"cannot reach the PostgreSQL server named by {VARIABLE}"):
            await asking
    finally:
        go_on.set()
        await asyncio.to_thread(postgres_server.resume)
    gc.collect()  # asyncio says "never retrieved" as it collects the task
    said = [record.getMessage() for record in caplog.records]
    assert not [line for line in said if "never retrieved" in line or 'File "' in line], said
    closed = [line for line in said if line.startswith("closed without waiting for the PostgreSQL server")]
    assert closed == [
        f"closed without waiting for the PostgreSQL server named by {VARIABLE}, which could not be reached:"
        " every message klaw accepted is stored there (the conversation log is kept in the database), and"
        " those left unanswered are answered at the next start; the replies of the turns cut short were not stored"
    ]
    async with await psycopg.AsyncConnection.connect(dsn) as connection:  # what was accepted is kept
        cursor = await connection.execute("SELECT count(*) FROM messages WHERE content = 'remember the blue door'")
        assert await cursor.fetchone() == (1,)
