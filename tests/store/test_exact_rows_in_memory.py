"""A small chat's vector search rescores its shortlist from the float rows kept with its int8 copy,
not from `vec_messages` (decision 350): the same hits and distances as exact float search, and no
vector read from the database once the chat is in memory. A chat that grows past `EXACT_ROWS_MAX`,
or a cache too small for the float rows, goes back to the database's rows, with the same answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.shared import vector_matrix
from klaw.store.shared.vector_matrix import row_bytes
from klaw.store.sqlite.store import SqliteStore
from tests.store.statement_trace import traced

DIM = 24
ALICE = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


async def fill(store: SqliteStore, vectors: npt.NDArray[np.float32], start: int = 0) -> list[int]:
    stored = await store.messages.append_many(
        [
            MessageRecord(ALICE, Role.USER, f"m{start + i}", created_at=T0 + timedelta(minutes=start + i))
            for i in range(len(vectors))
        ]
    )
    await store.vectors.put([(s.rowid, v) for s, v in zip(stored, vectors, strict=True)])
    return [s.rowid for s in stored]


def exact(rowids: list[int], vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int) -> list[int]:
    ids = np.asarray(rowids)
    distances = 1.0 - vectors @ query
    return [int(r) for r in ids[np.lexsort((ids, distances))][:k]]


def vector_reads(statements: list[tuple[str, object]]) -> int:
    return sum(1 for sql, _ in statements if "vec_messages" in sql and "sqlite_master" not in sql)


async def test_a_small_chat_is_searched_without_reading_its_vectors_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first search has loaded the chat, searches (and a vector stored since) read no
    vector from `vec_messages`; each answer is exact float search's, distances included. The old
    rescore read the shortlist's 40 rows from vec0 at every search."""
    statements = traced(monkeypatch)
    rng = np.random.default_rng(12)
    store = await SqliteStore.open(tmp_path / "small.db")
    try:
        await store.vectors.bind_embedder("test", DIM)
        vectors = unit_rows(rng, 1500)  # the bulk load's path (`vector_chunks.py`)
        rowids = await fill(store, vectors)
        await store.search.nearest(ALICE, vectors[0], limit=5)  # loads the chat
        later = unit_rows(rng, 3)
        rowids += await fill(store, later, start=1500)  # appended to the copy
        vectors = np.concatenate([vectors, later])
        statements.clear()
        for query in [*unit_rows(rng, 8), later[1]]:
            hits = await store.search.nearest(ALICE, query, limit=10, exclude=rowids[:50:7])
            kept = [i for i, rowid in enumerate(rowids) if rowid not in set(rowids[:50:7])]
            want = exact([rowids[i] for i in kept], vectors[kept], query, 10)
            assert [hit.message.rowid for hit in hits] == want
            assert np.allclose([hit.score for hit in hits], [1.0 - vectors[rowids.index(r)] @ query for r in want])
        assert hits[0].message.record.content == "m1501"
        assert vector_reads(statements) == 0
    finally:
        await store.aclose()


async def test_past_the_limit_or_the_budget_the_rescore_reads_the_disk_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat that grows past `EXACT_ROWS_MAX` drops its float rows; a cache with room for the int8
    rows only keeps the chat without them. Both rescore from the float rows beside the database
    (`klaw.db.floats`, decision 534; `vec_messages` without it), with the same answers."""
    monkeypatch.setattr(vector_matrix, "EXACT_ROWS_MAX", 100)
    statements = traced(monkeypatch)
    rng = np.random.default_rng(13)
    grown = await SqliteStore.open(tmp_path / "grown.db")
    tight = await SqliteStore.open(tmp_path / "tight.db", vector_cache_bytes=130 * row_bytes(DIM))
    try:
        vectors = unit_rows(rng, 120)
        for store in (grown, tight):
            await store.vectors.bind_embedder("test", DIM)
            rowids = await fill(store, vectors[:90])
            await store.search.nearest(ALICE, vectors[0], limit=5)
            rowids += await fill(store, vectors[90:], start=90)
            statements.clear()
            query = unit_rows(rng, 1)[0]
            hits = await store.search.nearest(ALICE, query, limit=10)
            assert [hit.message.rowid for hit in hits] == exact(rowids, vectors, query, 10)
            assert vector_reads(statements) == 0  # the rescore's rows read from klaw.db.floats
            assert store.vector_cache.cached_bytes == 120 * row_bytes(DIM)  # still cached, int8 rows only
    finally:
        await grown.aclose()
        await tight.aclose()
