"""Two engines' stores on one PostgreSQL database write the first messages of new chats at the same
moment: every message is stored, none refused with a deadlock (decision 248). Before, creating the
chat's row locked it (`ON CONFLICT DO UPDATE`) before the chat's advisory lock was taken, while an
append already holding that lock waited on the row for its foreign key."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import psycopg
import pytest

from klaw.store.postgres.connection import server_error
from klaw.store.postgres.store import PostgresStore
from klaw.store.protocol import StorageUnavailable
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"
CHATS = 12
PER_STORE = 3  # first messages each store sends to each new chat, all at once


async def test_first_messages_to_new_chats_from_two_engines_are_all_stored(postgres_server: PgServer) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    async with contextlib.AsyncExitStack() as stack:
        stores = [await PostgresStore.open(dsn, variable=VARIABLE, pool_size=8) for _ in range(2)]
        for store in stores:
            stack.push_async_callback(store.aclose)
        numbers = itertools.count()

        async def first(store: PostgresStore, chat: ChatRef) -> None:
            await store.messages.append(MessageRecord(chat, Role.USER, f"hello {next(numbers)}"))

        chats = [ChatRef("library", f"new-{i}") for i in range(CHATS)]
        sends = [first(s, c) for c in chats for _ in range(PER_STORE) for s in stores]
        results = await asyncio.gather(*sends, return_exceptions=True)
    failures = [repr(r) for r in results if isinstance(r, BaseException)]
    assert failures == []
    with psycopg.connect(dsn) as connection:
        row = connection.execute("SELECT count(*), count(DISTINCT chat_id) FROM messages").fetchone()
    assert row == (CHATS * PER_STORE * 2, CHATS)


def test_a_deadlock_is_named_as_such_not_as_a_server_out_of_reach() -> None:
    error = server_error(VARIABLE, psycopg.errors.DeadlockDetected("deadlock detected"))
    assert isinstance(error, StorageUnavailable)
    assert "deadlock detected" in str(error) and "cannot reach" not in str(error)
    assert "try again" in str(error)


@pytest.mark.parametrize("kind", [psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected])
def test_a_rolled_back_transaction_says_nothing_was_stored(kind: type[psycopg.Error]) -> None:
    assert "nothing of it was stored" in str(server_error(VARIABLE, kind("conflict")))
