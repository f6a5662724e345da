"""A small read runs on the event loop's own read connection when the engine is alone (decision 533), with the
pooled read's rules and answers: one read transaction a read (a write committed after it is seen by the next),
its exception the same as on a read thread, the connection usable after it. A read of a kind never measured,
one measured large, any read of a chat with a large kind of read, a read without a key (a summarizer's), a read
while another is on the read threads, or any read when the engine is not alone goes to a read thread as before.
A real klaw.db throughout; where a read ran is told by its thread's name."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import apsw
import pytest

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "alice")
OTHER = ChatRef("console", "bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
LOOP = threading.current_thread().name  # pytest's asyncio loop runs on the main thread


def _where(connection: apsw.Connection) -> tuple[str, int]:
    """The thread this read ran on, and the messages it saw."""
    count = connection.execute("SELECT count(*) FROM messages").fetchall()[0][0]
    assert isinstance(count, int)
    return threading.current_thread().name, count


async def _said(store: SqliteStore, *texts: str) -> None:
    records = [
        MessageRecord(CHAT, Role.USER, text, created_at=T0 + timedelta(seconds=i)) for i, text in enumerate(texts)
    ]
    await store.messages.append_many(records)


async def test_a_small_read_alone_runs_on_the_loop_and_sees_each_commit(store: SqliteStore) -> None:
    store.db.set_one_turn(lambda: True)
    await _said(store, "first")
    first = await store.db.read(_where, CHAT)
    assert first[0].startswith("klaw-sqlite-read")  # never measured: the read threads, which measure it
    assert first[1] == 1
    for said in range(2, 5):
        await _said(store, f"message {said}")
        where, seen = await store.db.read(_where, CHAT)
        assert where == LOOP  # alone, and small
        assert seen == said  # one snapshot a read: the write committed since is seen
    assert store.db.inline_reads == 3


async def test_not_alone_no_read_runs_on_the_loop(store: SqliteStore) -> None:
    alone = [False]
    store.db.set_one_turn(lambda: alone[0])
    await store.db.read(_where, CHAT)
    assert (await store.db.read(_where, CHAT))[0].startswith("klaw-sqlite-read")  # two turns in flight, say
    alone[0] = True
    assert (await store.db.read(_where, CHAT))[0] == LOOP

    entered, release = threading.Event(), threading.Event()

    def held(connection: apsw.Connection) -> str:
        entered.set()
        release.wait(30)
        return "held"

    holding = asyncio.ensure_future(store.db.read(held))
    await asyncio.to_thread(entered.wait, 30)
    beside = await store.db.read(_where, CHAT)
    assert beside[0].startswith("klaw-sqlite-read")  # a read on the read threads: not alone
    release.set()
    assert await holding == "held"
    assert store.db.inline_reads == 1


async def test_a_large_read_and_its_chats_reads_stay_on_the_read_threads(store: SqliteStore) -> None:
    store.db.set_one_turn(lambda: True)

    def large(connection: apsw.Connection) -> tuple[str, int]:
        """Tens of milliseconds of SQLite's CPU, well over the inline bound."""
        rows = connection.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000) SELECT sum(i) FROM n"
        ).fetchall()
        total = rows[0][0]
        assert isinstance(total, int)
        return threading.current_thread().name, total

    await store.db.read(_where, CHAT)
    await store.db.read(_where, OTHER)
    assert (await store.db.read(_where, CHAT))[0] == LOOP  # small, of a chat with no large read yet
    for _ in range(3):
        where, total = await store.db.read(large, CHAT)
        assert where.startswith("klaw-sqlite-read")
        assert total == 400000 * 400001 // 2
    # A chat with a large kind of read is a large chat: its small reads stay on the read threads too.
    assert (await store.db.read(_where, CHAT))[0].startswith("klaw-sqlite-read")
    assert (await store.db.read(_where, OTHER))[0] == LOOP  # another chat's are not held back
    for _ in range(2):  # a read without a key (a summarizer's, between turns) never runs on the loop
        assert (await store.db.read(_where))[0].startswith("klaw-sqlite-read")
    assert store.db.inline_reads == 2


def _missing_table(connection: apsw.Connection) -> object:
    return connection.execute("SELECT * FROM no_such_table").fetchall()


def _refused(connection: apsw.Connection) -> object:
    connection.execute("SELECT 1").fetchall()
    raise ValueError("this read refuses its rows")


@pytest.mark.parametrize(("read", "error"), [(_missing_table, apsw.SQLError), (_refused, ValueError)])
async def test_an_inline_read_that_raises_answers_as_a_pooled_read(
    store: SqliteStore, read: object, error: type
) -> None:
    assert callable(read)
    store.db.set_one_turn(lambda: True)
    await store.db.read(_where, CHAT)  # measured, for the read after the error
    with pytest.raises(error) as pooled:
        await store.db.read(read, CHAT)  # on a read thread (never measured), which measures it
    with pytest.raises(error) as inline:
        await store.db.read(read, CHAT)  # on the loop now
    assert store.db.inline_reads == 1
    assert type(inline.value) is type(pooled.value)
    assert str(inline.value) == str(pooled.value)
    await _said(store, "after the error")
    assert await store.db.read(_where, CHAT) == (LOOP, 1)  # the loop's connection left no transaction open
    assert store.db.inline_reads == 2
