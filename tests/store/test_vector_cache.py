"""The in-memory vector search gives exactly sqlite-vec's answers, stays current and bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.shared.vector_matrix import row_bytes
from klaw.store.sqlite.store import SqliteStore
from tests.store.statement_trace import store_statements

DIM = 16
ALICE = ChatRef("console", "alice")
BOB = ChatRef("console", "bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


async def fill(
    store: SqliteStore, chat: ChatRef, vectors: npt.NDArray[np.float32], *, new_segment_at: int = -1
) -> None:
    records = []
    for i in range(len(vectors)):
        if i == new_segment_at:
            records.append(
                MessageRecord(
                    chat=chat,
                    role=Role.SYSTEM,
                    type=MessageType.SESSION_BREAK,
                    content="",
                    created_at=T0 + timedelta(minutes=i, seconds=-1),
                )
            )
        records.append(MessageRecord(chat=chat, role=Role.USER, content=f"m{i}", created_at=T0 + timedelta(minutes=i)))
    stored = [s for s in await store.messages.append_many(records) if s.record.type is not MessageType.SESSION_BREAK]
    await store.vectors.put([(s.rowid, v) for s, v in zip(stored, vectors, strict=True)])


async def open_pair(tmp_path: Path, vectors: npt.NDArray[np.float32]) -> tuple[SqliteStore, SqliteStore]:
    """The same data in a cached store and in one that always asks sqlite-vec."""
    cached = await SqliteStore.open(tmp_path / "cached.db")
    plain = await SqliteStore.open(tmp_path / "plain.db", vector_cache_bytes=0)
    for store in (cached, plain):
        await store.vectors.bind_embedder("test", DIM)
        await fill(store, ALICE, vectors, new_segment_at=150)
    return cached, plain


async def test_cached_search_returns_what_sqlite_vec_returns(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    cached, plain = await open_pair(tmp_path, unit_rows(rng, 300))
    try:
        second_segment = (await cached.segments.current(ALICE)).id
        for query in unit_rows(rng, 10):
            for scope in (
                {},
                {"segment_id": second_segment},
                {"before_segment_id": second_segment},
                {"since": T0 + timedelta(minutes=40), "until": T0 + timedelta(minutes=90)},
            ):
                got = await cached.search.nearest(ALICE, query, limit=7, **scope)
                want = await plain.search.nearest(ALICE, query, limit=7, **scope)
                assert [h.message.record.content for h in got] == [h.message.record.content for h in want]
                assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
        assert cached.vector_cache.cached_bytes > 0
        assert plain.vector_cache.cached_bytes == 0
    finally:
        await cached.aclose()
        await plain.aclose()


async def test_vectors_stored_after_the_first_search_are_found(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    store = await SqliteStore.open(tmp_path / "k.db")
    try:
        await store.vectors.bind_embedder("test", DIM)
        await fill(store, ALICE, unit_rows(rng, 20))
        target = unit_rows(rng, 1)[0]
        assert all(h.score > 1e-4 for h in await store.search.nearest(ALICE, target, limit=3))  # now cached
        stored = await store.messages.append(
            MessageRecord(chat=ALICE, role=Role.USER, content="late", created_at=T0 + timedelta(days=1))
        )
        await store.vectors.put([(stored.rowid, target)])
        hits = await store.search.nearest(ALICE, target, limit=3)
        assert hits[0].message.record.content == "late"
        assert hits[0].score < 1e-5
    finally:
        await store.aclose()


async def test_a_chat_too_large_for_the_budget_is_searched_by_sqlite_vec(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vectors = unit_rows(rng, 100)
    store = await SqliteStore.open(tmp_path / "small.db", vector_cache_bytes=100 * row_bytes(DIM) // 2)
    try:
        await store.vectors.bind_embedder("test", DIM)
        await fill(store, ALICE, vectors)
        hits = await store.search.nearest(ALICE, vectors[42], limit=1)
        assert hits[0].message.record.content == "m42"
        assert store.vector_cache.cached_bytes == 0
    finally:
        await store.aclose()


async def test_least_recently_searched_chat_is_evicted(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    one_chat = 60 * row_bytes(DIM)
    store = await SqliteStore.open(tmp_path / "lru.db", vector_cache_bytes=int(1.5 * one_chat))
    try:
        await store.vectors.bind_embedder("test", DIM)
        alice, bob = unit_rows(rng, 60), unit_rows(rng, 60)
        await fill(store, ALICE, alice)
        await fill(store, BOB, bob)
        await store.search.nearest(ALICE, alice[0], limit=1)
        alice_only = store.vector_cache.cached_bytes
        hits = await store.search.nearest(BOB, bob[5], limit=1)
        assert hits[0].message.record.content == "m5"
        assert store.vector_cache.cached_bytes == alice_only  # Alice's copy made room for Bob's
        hits = await store.search.nearest(ALICE, alice[7], limit=1)
        assert hits[0].message.record.content == "m7"
    finally:
        await store.aclose()


async def test_rebinding_to_another_embedder_drops_cached_vectors(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "rebind.db")
    try:
        await store.vectors.bind_embedder("first", DIM)
        await store.search.nearest(ALICE, unit_rows(np.random.default_rng(5), 1)[0], limit=1)
        await store.vectors.bind_embedder("second", 8)
        assert store.vector_cache.cached_bytes == 0
        assert await store.search.nearest(ALICE, np.ones(8, dtype=np.float32) / np.sqrt(8), limit=1) == []
    finally:
        await store.aclose()


async def test_warming_loads_recent_chats_that_fit_without_evicting(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    one_chat = 60 * row_bytes(DIM)
    path = tmp_path / "warm.db"
    store = await SqliteStore.open(path)
    await store.vectors.bind_embedder("test", DIM)
    await fill(store, ALICE, unit_rows(rng, 60))
    await fill(store, BOB, unit_rows(rng, 60))
    await store.aclose()

    store = await SqliteStore.open(path, vector_cache_bytes=int(1.5 * one_chat))
    try:
        await store.vectors.bind_embedder("test", DIM)
        assert await store.vectors.warm_cache() == 1  # only one of the two fits
        assert store.vector_cache.cached_bytes == one_chat
    finally:
        await store.aclose()


async def test_warming_reads_the_vector_table_once_however_many_chats(tmp_path: Path) -> None:
    """Start-up time must not grow with chats x vectors: one query per chat cost ~35 ms each (105 s for
    3,050 chats). Counted as statements SQLite runs, not timed."""
    rng = np.random.default_rng(7)
    chats = [ChatRef("web", f"chat{n}") for n in range(30)]
    path = tmp_path / "warm.db"
    store = await SqliteStore.open(path)
    await store.vectors.bind_embedder("test", DIM)
    for chat in chats:
        await fill(store, chat, unit_rows(rng, 3))
    await store.aclose()

    store = await SqliteStore.open(path)
    try:
        await store.vectors.bind_embedder("test", DIM)
        statements = await store_statements(store)
        assert await store.vectors.warm_cache() == len(chats)
        # Small chats keep their float rows too (decision 350): 4 bytes a dimension more.
        assert store.vector_cache.cached_bytes == len(chats) * 3 * (row_bytes(DIM) + 4 * DIM)
        assert len([sql for sql in statements if "vec_messages" in sql and "sqlite_master" not in sql]) == 1
        hits = await store.search.nearest(chats[7], unit_rows(rng, 1)[0], limit=3)
        assert len(hits) == 3
    finally:
        await store.aclose()


async def test_a_chat_that_fits_stays_cached_when_it_grows_within_the_budget(tmp_path: Path) -> None:
    """Appending past the arrays' capacity allocates room ahead; only rows in use count against the
    budget, so a chat near it is not pushed out to sqlite-vec by its next message."""
    rng = np.random.default_rng(8)
    store = await SqliteStore.open(tmp_path / "grow.db", vector_cache_bytes=100 * row_bytes(DIM))
    try:
        await store.vectors.bind_embedder("test", DIM)
        first, later = unit_rows(rng, 90), unit_rows(rng, 5)
        await fill(store, ALICE, first)
        await store.search.nearest(ALICE, first[0], limit=1)
        assert store.vector_cache.cached_bytes == 90 * row_bytes(DIM)
        await fill(store, ALICE, later)
        assert store.vector_cache.cached_bytes == 95 * row_bytes(DIM)
    finally:
        await store.aclose()
