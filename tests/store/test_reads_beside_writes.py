"""A turn's reads run beside the database thread's writes (decision 216, store/sqlite/read_pool.py).

The database thread runs every write, the embedding queue's and the summarizers' too; a search queued
behind them waited for all of them. Here the thread is held inside a write transaction that has not
committed (a long write), and the reads of a turn's context (window, full text, vector search and
its neighbours, word counts, messages by rowid, an exchange's records) still answer, with what was
committed: the held write is not seen until it commits, then is, and a forgotten message is never
shown once its delete has committed. On the old code every read here waited for the held write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import apsw
import numpy as np

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.store.held_thread import thread_held

T = TypeVar("T")
CHAT = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 8
ANSWERED_WITHIN = 60.0  # a safety net for a read that must not wait for the held write...
HELD_SECONDS = 180.0  # ...which is held longer, so a read that waits for it fails


def unit(i: int) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[i % DIM] = 1.0
    return vector


async def said(store: SqliteStore, texts: list[str], start: int = 0) -> list[int]:
    records = [
        MessageRecord(CHAT, Role.USER if i % 2 == 0 else Role.ASSISTANT, text, created_at=T0 + timedelta(seconds=i))
        for i, text in enumerate(texts, start=start)
    ]
    return [m.rowid for m in await store.messages.append_many(records)]


def writer_held(store: SqliteStore, rowid: int) -> AbstractAsyncContextManager[None]:
    """The database thread inside an uncommitted write (the message `rowid` deleted) until the block
    ends, when the write commits."""

    def delete(connection: apsw.Connection) -> None:
        connection.execute("DELETE FROM messages WHERE rowid = ?", (rowid,))

    return thread_held(store, HELD_SECONDS, delete)


async def answered(read: Awaitable[T]) -> T:
    """`read`'s answer, which must come while the writer is held."""
    return await asyncio.wait_for(read, timeout=ANSWERED_WITHIN)


async def test_a_turns_reads_answer_while_the_database_thread_holds_a_long_write(store: SqliteStore) -> None:
    await store.vectors.bind_embedder("test-embedder", DIM)
    rowids = await said(store, ["tea in the garden", "orchids bloom", "the garden gate", "plain words"])
    await store.vectors.put([(rowid, unit(i)) for i, rowid in enumerate(rowids)])
    segment = (await store.messages.by_rowids(rowids[:1]))[0].segment_id
    first = await store.search.nearest(CHAT, unit(0), limit=2, segment_id=segment)  # the chat's copy in memory
    assert first[0].message.rowid == rowids[0]

    async with writer_held(store, rowids[2]):  # "the garden gate" deleted, not yet committed
        window = await answered(store.messages.window(segment, 10))
        assert [m.rowid for m in window] == rowids  # the uncommitted delete is not seen
        hits = await answered(store.search.full_text(CHAT, "garden", limit=5, segment_id=segment))
        assert hits[0].message.rowid in (rowids[0], rowids[2])  # its own word (neighbours' count less)
        assert rowids[2] in {hit.message.rowid for hit in hits}
        nearest = await answered(store.search.nearest(CHAT, unit(1), limit=1, segment_id=segment))
        assert [hit.message.rowid for hit in nearest] == [rowids[1]]
        around = await answered(store.search.neighbours(window[1:2], 1))
        assert around[rowids[1]] == [(rowids[0], 1), (rowids[2], 1)]
        counts = await answered(store.search.word_counts(CHAT, "garden", max_share=1.0, min_cap=1, segment_id=segment))
        assert counts.counts == {"garden": 2}
        assert [m.rowid for m in await answered(store.messages.by_rowids(rowids[2:3]))] == rowids[2:3]

    # Committed now: every read started after it leaves the deleted message out.
    window = await store.messages.window(segment, 10)
    assert rowids[2] not in [m.rowid for m in window]
    hits = await store.search.full_text(CHAT, "garden", limit=5, segment_id=segment)
    assert hits[0].message.rowid == rowids[0]
    assert rowids[2] not in {hit.message.rowid for hit in hits}
    assert await store.messages.by_rowids(rowids[2:3]) == []
    nearest = await store.search.nearest(CHAT, unit(2), limit=4, segment_id=segment)
    assert rowids[2] not in [hit.message.rowid for hit in nearest]


async def test_a_message_appended_is_read_at_once_beside_the_writes(store: SqliteStore) -> None:
    """Read-your-writes: an append the caller awaited is committed before its next read starts."""
    rowids = await said(store, ["first words"])
    segment = (await store.messages.by_rowids(rowids))[0].segment_id
    for i in range(20):
        [rowid] = await said(store, [f"message {i} about kettles"], start=i + 1)
        window = await store.messages.window(segment, 1)
        assert [m.rowid for m in window] == [rowid]
        hits = await store.search.full_text(CHAT, "kettles", limit=50, segment_id=segment)
        holding = [hit for hit in hits if "kettles" in hit.message.content]
        assert len(holding) == i + 1  # the term memo's bounds follow every insert


async def test_the_read_connections_close_with_the_store(store: SqliteStore) -> None:
    await said(store, ["hello"])
    await store.search.full_text(CHAT, "hello", limit=1)
    await store.aclose()
    reopened = await SqliteStore.open(store.db.path)
    try:  # the file was left whole: WAL checkpointed by the writer after the readers closed
        assert len(await reopened.search.full_text(CHAT, "hello", limit=1)) == 1
    finally:
        await reopened.aclose()
