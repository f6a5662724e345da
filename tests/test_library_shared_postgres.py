"""Two library engines on one PostgreSQL database (docs/postgres.md, "Several engines, one database"):
asks on the same chat through both, at once, are each answered once, and each `ask` returns the reply
of the turn that answered its message, whichever engine ran that turn (decision 248)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from klaw import AgentInfo, AgentMessage, ChatMessage, FunctionModel, Klaw
from tests.conftest import new_database
from tests.pg_server import PgServer

CHAT = "shared"


def _config() -> dict[str, object]:
    return {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "database": {"backend": "postgres", "urlEnv": "KLAW_TEST_SHARED_URL"},
    }


def _model(calls: list[int]) -> FunctionModel:
    """A model slow enough that the asks made meanwhile wait and join one turn; each reply is unique."""
    numbers = itertools.count(1)

    async def answer(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        await asyncio.sleep(0.3)
        calls.append(1)
        return f"reply {next(numbers)}"

    return FunctionModel(answer)


async def test_concurrent_asks_through_two_engines_are_each_answered_once(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    monkeypatch.setenv("KLAW_TEST_SHARED_URL", dsn)
    told: list[AgentMessage] = []

    async def on_message(message: AgentMessage) -> None:
        told.append(message)

    calls: list[int] = []
    async with contextlib.AsyncExitStack() as stack:
        a, b = [
            await stack.enter_async_context(
                Klaw(tmp_path / name, config=_config(), model=_model(calls), on_message=on_message)
            )
            for name in "ab"
        ]
        assert await a.ask(CHAT, "warm a") and await b.ask(CHAT, "warm b")
        asking = [a, b, a, b, a, b]
        replies = await asyncio.wait_for(
            asyncio.gather(*(k.ask(CHAT, f"message {i}") for i, k in enumerate(asking))), 60
        )
        history = await a.history(CHAT)
        status = await b.ask("other", "/status")  # the store a program's config chose (decision 456)
        turns = await b.turns(CHAT)

    written = [e.text for e in history if e.role == "assistant"]
    assert set(replies) <= set(written)  # every ask got a reply the chat holds
    assert len(written) == len(calls) == len(turns)  # one reply per turn: no message answered twice
    assert all(t.status == "completed" for t in turns)
    assert "Store: PostgreSQL, the database $KLAW_TEST_SHARED_URL names" in status.splitlines()
    assert told == []  # replies answered asks: none went to on_message as sent on the agent's own
    with psycopg.connect(dsn) as connection:
        row = connection.execute(
            "SELECT count(*), count(DISTINCT user_message_rowid) FROM exchanges WHERE status <> 'open'"
        ).fetchone()
    assert row is not None and row[0] == row[1] == len(turns)
