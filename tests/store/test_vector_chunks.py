"""A large chat's first copy is read in bulk from sqlite-vec's chunk tables (decision 236), gives
what row-by-row reading gave, and is never trusted when the chunks do not read as sqlite-vec reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt

from klaw.store.archival_records import forget_record
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.shared.vector_quant import quantize
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_chunks import BULK_MIN_ROWS
from tests.store.statement_trace import store_statements

DIM = 16
ALICE = ChatRef("console", "alice")
BOB = ChatRef("console", "bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROWS = BULK_MIN_ROWS + 300
FORGOTTEN = (3, 200, 201, 900)  # slots cleared in the middle of chunks: their places are not in order


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


async def open_store(path: Path) -> SqliteStore:
    # No saved copies (a chat this small is never saved at the default size): every start reads the table.
    store = await SqliteStore.open(path, vector_cache_bytes=64 << 20)
    await store.vectors.bind_embedder("test", DIM)
    return store


async def add(store: SqliteStore, chat: ChatRef, vectors: npt.NDArray[np.float32], first: int = 0) -> list[str]:
    records = [
        MessageRecord(chat=chat, role=Role.USER, content=f"{chat.chat_id}{i}", created_at=T0 + timedelta(minutes=i))
        for i in range(first, first + len(vectors))
    ]
    stored = await store.messages.append_many(records)
    await store.vectors.put([(s.rowid, v) for s, v in zip(stored, vectors, strict=True)])
    return [s.record.id for s in stored]


async def build(path: Path, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """Alice's large chat, with a few messages forgotten, beside Bob's, written in turns so their
    chunks interleave. Returns Alice's vectors (forgotten ones included)."""
    alice = unit_rows(rng, ROWS)
    store = await open_store(path)
    try:
        ids: list[str] = []
        for first in range(0, ROWS, 500):
            ids += await add(store, ALICE, alice[first : first + 500], first)
            await add(store, BOB, unit_rows(rng, 40), first)
        forgotten = [ids[i] for i in FORGOTTEN]
        await store.messages.append_many([forget_record(ALICE, forgotten, "message", [], T0 + timedelta(days=9))])
    finally:
        await store.aclose()
    return alice


def row_scans(statements: list[str]) -> list[str]:
    return [sql for sql in statements if "FROM vec_messages WHERE chat_key" in sql]


async def assert_exact(store: SqliteStore, alice: npt.NDArray[np.float32], rng: np.random.Generator) -> None:
    kept = np.array([i for i in range(ROWS) if i not in FORGOTTEN])
    for query in unit_rows(rng, 5):
        hits = await store.search.nearest(ALICE, query, limit=10)
        exact = kept[np.argsort(1.0 - alice[kept] @ query, kind="stable")[:10]]
        assert [h.message.record.content for h in hits] == [f"alice{i}" for i in exact]


async def test_a_large_chat_is_read_from_its_chunks_and_matches_the_vectors(tmp_path: Path) -> None:
    rng = np.random.default_rng(31)
    path = tmp_path / "klaw.db"
    alice = await build(path, rng)
    store = await open_store(path)
    try:
        statements = await store_statements(store)
        await assert_exact(store, alice, rng)
        assert row_scans(statements) == []  # the old load asked vec0 for every row
        view = store.vector_cache.cached_view(1, DIM)
        assert view is not None
        kept = [i for i in range(ROWS) if i not in FORGOTTEN]
        codes, scales = quantize(alice[kept])
        assert np.array_equal(view.codes, codes) and np.array_equal(view.scales, scales)
        assert np.all(np.diff(view.rowids) > 0)
        assert view.created.tolist() == [int((T0 + timedelta(minutes=i)).timestamp() * 1000) for i in kept]
    finally:
        await store.aclose()


async def test_chunks_that_do_not_read_as_sqlite_vec_reads_them_are_not_trusted(tmp_path: Path) -> None:
    """Two rowids swapped in a chunk's rowid list (what a changed layout would look like): the
    sampled check against vec0's own answer catches it, and the chat is read row by row instead."""
    rng = np.random.default_rng(32)
    path = tmp_path / "klaw.db"
    alice = await build(path, rng)
    connection = apsw.Connection(str(path))
    first = connection.execute(
        "SELECT chunk_id, rowids FROM vec_messages_chunks WHERE partition00 = 1 ORDER BY chunk_id LIMIT 1"
    ).fetchone()
    assert first is not None
    chunk_id, rowids = first
    ids = np.frombuffer(rowids, dtype=np.int64).copy()
    ids[[0, 1]] = ids[[1, 0]]
    connection.execute("UPDATE vec_messages_chunks SET rowids = ? WHERE chunk_id = ?", (ids.tobytes(), chunk_id))
    connection.close()

    store = await open_store(path)
    try:
        statements = await store_statements(store)
        await assert_exact(store, alice, rng)
        assert len(row_scans(statements)) == 1
    finally:
        await store.aclose()


async def test_a_loaded_chat_takes_its_next_vectors_without_copying_its_rows(tmp_path: Path) -> None:
    """A chat's copy is loaded with room ahead (decision 498), from the chunks or row by row: the next
    message's vector is stored past the loaded rows instead of every row being copied into new arrays,
    and the search still finds it."""
    rng = np.random.default_rng(33)
    path = tmp_path / "klaw.db"
    alice = await build(path, rng)
    store = await open_store(path)
    try:
        await assert_exact(store, alice, rng)  # Alice's copy, read from the chunks
        await store.search.nearest(BOB, unit_rows(rng, 1)[0], limit=3)  # Bob's, small: row by row, floats kept
        chats = ((ALICE, 1, f"alice{ROWS}"), (BOB, 2, "bob5000"))
        before = [store.vector_cache.cached_view(key, DIM) for _, key, _ in chats]
        later = unit_rows(rng, 2)
        await add(store, ALICE, later[:1], ROWS)
        await add(store, BOB, later[1:], 5000)
        for (chat, key, content), loaded, vector in zip(chats, before, later, strict=True):
            view = store.vector_cache.cached_view(key, DIM)
            assert view is not None and loaded is not None
            assert len(view) == len(loaded) + 1
            assert np.shares_memory(view.codes, loaded.codes)
            hits = await store.search.nearest(chat, vector, limit=1)
            assert [h.message.record.content for h in hits] == [content]
        bob = store.vector_cache.cached_view(2, DIM)
        assert bob is not None and bob.floats is not None and before[1] is not None and before[1].floats is not None
        assert np.shares_memory(bob.floats, before[1].floats)
    finally:
        await store.aclose()
