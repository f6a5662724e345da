"""Int8 search gives exact float search's hits; a large chat's copy saved beside klaw.db is used
only while current, and never brings back a forgotten message."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from klaw.store.archival_records import forget_record
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_snapshot import SnapshotFolder
from tests.store.statement_trace import store_statements

DIM = 64
ALICE = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MIN_ROWS = 50  # chats this large are saved (the default is 20k; small here to keep the test fast)


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


async def open_store(path: Path, *, cache: bool = True) -> SqliteStore:
    store = await SqliteStore.open(
        path, vector_cache_bytes=(64 << 20) if cache else 0, vector_snapshot_min_rows=MIN_ROWS
    )
    await store.vectors.bind_embedder("test", DIM)
    return store


async def add(store: SqliteStore, vectors: npt.NDArray[np.float32], first: int = 0) -> list[str]:
    records = [
        MessageRecord(chat=ALICE, role=Role.USER, content=f"m{first + i}", created_at=T0 + timedelta(minutes=first + i))
        for i in range(len(vectors))
    ]
    stored = await store.messages.append_many(records)
    await store.vectors.put([(s.rowid, v) for s, v in zip(stored, vectors, strict=True)])
    return [s.record.id for s in stored]


def scans_of_vectors(statements: list[str]) -> list[str]:
    return [sql for sql in statements if "FROM vec_messages WHERE chat_key" in sql]


async def test_int8_search_returns_exact_float_hits_and_distances(tmp_path: Path) -> None:
    rng = np.random.default_rng(21)
    vectors = unit_rows(rng, 3000)
    store = await open_store(tmp_path / "exact.db")
    try:
        await add(store, vectors)
        for query in unit_rows(rng, 20):
            hits = await store.search.nearest(ALICE, query, limit=20)
            exact = np.argsort(1.0 - vectors @ query, kind="stable")[:20]
            assert [h.message.record.content for h in hits] == [f"m{i}" for i in exact]
            assert np.allclose([h.score for h in hits], 1.0 - vectors[exact] @ query, atol=1e-6)
    finally:
        await store.aclose()


async def test_a_saved_copy_is_loaded_without_scanning_the_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(22)
    path = tmp_path / "klaw.db"
    vectors = unit_rows(rng, 120)
    store = await open_store(path)
    await add(store, vectors)
    before = await store.search.nearest(ALICE, vectors[9], limit=5)
    await store.aclose()

    folder = SnapshotFolder.beside(path)
    assert [saved.name for saved in folder.path.iterdir()] == ["chat-1"]
    assert {stat.S_IMODE(os.stat(f).st_mode) for f in (folder.path, folder.chat(1))} == {0o700}
    files = list(folder.chat(1).iterdir())
    assert len(files) == 6 and {stat.S_IMODE(os.stat(f).st_mode) for f in files} == {0o600}

    store = await open_store(path)
    try:
        statements = await store_statements(store)
        after = await store.search.nearest(ALICE, vectors[9], limit=5)
        assert [h.message.rowid for h in after] == [h.message.rowid for h in before]
        assert scans_of_vectors(statements) == []
    finally:
        await store.aclose()


async def test_a_stale_copy_is_rebuilt_from_the_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(23)
    path = tmp_path / "klaw.db"
    store = await open_store(path)
    await add(store, unit_rows(rng, 100))
    await store.search.nearest(ALICE, unit_rows(rng, 1)[0], limit=1)
    await store.aclose()
    # Another process (no cache, so the saved copy is not touched) adds a vector: the copy is stale.
    late = unit_rows(rng, 1)
    other = await open_store(path, cache=False)
    await add(other, late, first=100)
    await other.aclose()

    store = await open_store(path)
    try:
        statements = await store_statements(store)
        hits = await store.search.nearest(ALICE, late[0], limit=1)
        assert hits[0].message.record.content == "m100"
        assert len(scans_of_vectors(statements)) == 1
    finally:
        await store.aclose()


async def test_a_forgotten_message_never_comes_back_from_a_saved_copy(tmp_path: Path) -> None:
    rng = np.random.default_rng(24)
    path = tmp_path / "klaw.db"
    vectors = unit_rows(rng, 100)
    store = await open_store(path)
    ids = await add(store, vectors)
    await store.search.nearest(ALICE, vectors[0], limit=1)
    await store.aclose()
    folder = SnapshotFolder.beside(path)
    assert folder.chat(1).exists()

    # Forgotten by a process that holds no copy: the saved one is left behind, but stale.
    other = await open_store(path, cache=False)
    await other.messages.append_many([forget_record(ALICE, [ids[30]], "message", [], T0 + timedelta(days=1))])
    await other.aclose()
    store = await open_store(path)
    try:
        hits = await store.search.nearest(ALICE, vectors[30], limit=10)
        assert "m30" not in [h.message.record.content for h in hits]
        # Forgotten by the engine holding the copy: its saved copy goes at once.
        await store.messages.append_many([forget_record(ALICE, [ids[31]], "message", [], T0 + timedelta(days=2))])
        assert not folder.chat(1).exists()
        hits = await store.search.nearest(ALICE, vectors[31], limit=10)
        assert "m31" not in [h.message.record.content for h in hits]
    finally:
        await store.aclose()
    store = await open_store(path)
    try:
        hits = await store.search.nearest(ALICE, vectors[31], limit=10)
        assert {"m30", "m31"}.isdisjoint(h.message.record.content for h in hits)
    finally:
        await store.aclose()


async def test_an_unreadable_copy_is_ignored(tmp_path: Path) -> None:
    rng = np.random.default_rng(25)
    path = tmp_path / "klaw.db"
    vectors = unit_rows(rng, 80)
    store = await open_store(path)
    await add(store, vectors)
    await store.search.nearest(ALICE, vectors[0], limit=1)
    await store.aclose()
    (SnapshotFolder.beside(path).chat(1) / "codes.npy").write_bytes(b"not a saved copy")

    store = await open_store(path)
    try:
        hits = await store.search.nearest(ALICE, vectors[5], limit=1)
        assert hits[0].message.record.content == "m5"
    finally:
        await store.aclose()


async def test_a_copy_that_reads_but_is_not_the_databases_is_rebuilt(tmp_path: Path) -> None:
    """A copy with a current stamp whose rows are wrong (a file from elsewhere, a disk error that
    kept its shape) would steer the int8 shortlist to the wrong messages: its sampled rows are
    compared with the table, and it is rebuilt instead of trusted."""
    rng = np.random.default_rng(26)
    path = tmp_path / "klaw.db"
    vectors = unit_rows(rng, 120)
    store = await open_store(path)
    await add(store, vectors)
    await store.search.nearest(ALICE, vectors[0], limit=1)
    await store.aclose()
    codes = SnapshotFolder.beside(path).chat(1) / "codes.npy"
    np.save(codes, -np.load(codes), allow_pickle=False)  # same shape, every row pointing the other way

    store = await open_store(path)
    try:
        statements = await store_statements(store)
        for query in unit_rows(rng, 5):
            hits = await store.search.nearest(ALICE, query, limit=10)
            exact = np.argsort(1.0 - vectors @ query, kind="stable")[:10]
            assert [h.message.record.content for h in hits] == [f"m{i}" for i in exact]
        assert len(scans_of_vectors(statements)) == 1
    finally:
        await store.aclose()
