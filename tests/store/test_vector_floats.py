"""The exact rescore reads a large chat's float rows from `klaw.db.floats` (decision 534): the same hits
and distances as from `vec_messages`, whatever the file holds after a crash, a lost write, damage or
its loss; a forget zeroes its rows there before it commits; reindex moves the build's file in."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt
import pytest

from klaw.store.archival_records import forget_record
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.float_index import RecordIndex
from klaw.store.sqlite.job_ledger import JobLedger
from klaw.store.sqlite.rebuild import SqliteRebuild
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_floats import HEADER_BYTES, FloatFile
from tests.store.statement_trace import traced

DIM = 16
ALICE = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROWS = 300
RESCORE_READ = "JOIN vec_messages AS v ON v.rowid = j.value"


@pytest.fixture(autouse=True)
def large_chats(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chat past 50 rows keeps no float rows in memory: its shortlist is rescored from the disk."""
    monkeypatch.setattr("klaw.store.shared.vector_matrix.EXACT_ROWS_MAX", 50)
    monkeypatch.setattr(RecordIndex, "FOLD_AT", 64)  # the index's folds run in every test


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


async def open_store(path: Path, embedder: str = "test") -> SqliteStore:
    store = await SqliteStore.open(path, vector_cache_bytes=64 << 20)
    await store.vectors.bind_embedder(embedder, DIM)
    return store


async def add(store: SqliteStore, vectors: npt.NDArray[np.float32]) -> list[tuple[int, str]]:
    records = [
        MessageRecord(chat=ALICE, role=Role.USER, content=f"m{i}", created_at=T0 + timedelta(minutes=i))
        for i in range(len(vectors))
    ]
    stored = await store.messages.append_many(records)
    await store.vectors.put([(s.rowid, v) for s, v in zip(stored, vectors, strict=True)])
    return [(s.rowid, s.record.id) for s in stored]


async def build(path: Path, rng: np.random.Generator) -> tuple[npt.NDArray[np.float32], list[tuple[int, str]]]:
    vectors = unit_rows(rng, ROWS)
    store = await open_store(path)
    try:
        rows = await add(store, vectors)
    finally:
        await store.aclose()
    return vectors, rows


RECORD = 8 + DIM * 4


def records(path: Path) -> dict[int, npt.NDArray[np.float32]]:
    """The file's records by rowid, read as a person would from its format (the last of a rowid wins)."""
    data = FloatFile.beside(path).path.read_bytes()[HEADER_BYTES:]
    found = {}
    for offset in range(0, len(data) - RECORD + 1, RECORD):
        rowid = int(np.frombuffer(data[offset : offset + 8], dtype="<i8")[0])
        found[rowid] = np.frombuffer(data[offset + 8 : offset + RECORD], dtype="<f4")
    return found


def slot(path: Path, rowid: int) -> npt.NDArray[np.float32]:
    return records(path).get(rowid, np.zeros(DIM, dtype=np.float32))


def write_slot(path: Path, rowid: int, vector: npt.NDArray[np.float32]) -> None:
    data = FloatFile.beside(path).path.read_bytes()[HEADER_BYTES:]
    for offset in range(0, len(data), RECORD):
        if int(np.frombuffer(data[offset : offset + 8], dtype="<i8")[0]) == rowid:
            with open(FloatFile.beside(path).path, "r+b") as handle:
                handle.seek(HEADER_BYTES + offset + 8)
                handle.write(np.asarray(vector, dtype=np.float32).tobytes())
            return
    raise AssertionError(f"no record of {rowid}")


async def answers(store: SqliteStore, queries: npt.NDArray[np.float32]) -> list[list[tuple[str, float | None]]]:
    return [
        [(h.message.record.content, h.score) for h in await store.search.nearest(ALICE, q, limit=10)] for q in queries
    ]


async def table_answers(path: Path, queries: npt.NDArray[np.float32]) -> list[list[tuple[str, float | None]]]:
    """What the rescore gives from `vec_messages` alone (the file taken away for the search)."""
    kept = FloatFile.beside(path).paths()
    for file in kept:
        os.replace(file, file.with_name(file.name + ".aside"))
    store = await open_store(path)
    try:
        return await answers(store, queries)
    finally:
        await store.aclose()
        for file in kept:
            os.replace(file.with_name(file.name + ".aside"), file)


async def test_the_rescore_reads_the_file_and_answers_as_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "klaw.db"
    vectors, rows = await build(path, rng)
    queries = unit_rows(rng, 8)
    expected = await table_answers(path, queries)
    floats = FloatFile.beside(path).path
    assert floats.stat().st_mode & 0o777 == 0o600
    assert np.array_equal(slot(path, rows[7][0]), vectors[7])

    statements = traced(monkeypatch)
    store = await open_store(path)
    try:
        assert await answers(store, queries) == expected  # the same hits and the same distances
        exact = [np.argsort(1.0 - vectors @ q, kind="stable")[:10] for q in queries]
        assert [[c for c, _ in hits] for hits in expected] == [[f"m{i}" for i in e] for e in exact]
    finally:
        await store.aclose()
    assert not [sql for sql, _ in statements if RESCORE_READ in sql]  # no vec0 lookup for the rescore


async def test_a_forget_zeroes_its_rows_in_the_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    path = tmp_path / "klaw.db"
    vectors, rows = await build(path, rng)
    store = await open_store(path)
    try:
        gone = [rows[5], rows[120]]
        await store.messages.append_many(
            [forget_record(ALICE, [i for _, i in gone], "message", [], T0 + timedelta(days=1))]
        )
        for rowid, _ in gone:
            assert not slot(path, rowid).any()
        data = FloatFile.beside(path).path.read_bytes()
        assert vectors[5].tobytes() not in data and vectors[120].tobytes() not in data
        listed = np.fromfile(FloatFile.beside(path).rowids_path, dtype="<i8").tolist()
        assert gone[0][0] not in listed and gone[1][0] not in listed
        assert np.array_equal(slot(path, rows[6][0]), vectors[6])  # its neighbour kept
        hits = await store.search.nearest(ALICE, vectors[5], limit=10)
        assert "m5" not in [h.message.record.content for h in hits]
    finally:
        await store.aclose()


async def test_a_lost_or_wrong_row_is_read_from_the_table_then_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power cut's lost write (a zero slot) and a damaged slot (another row's vector): the search
    answers from `vec_messages`, says so without content, and the rows are rewritten from the table."""
    rng = np.random.default_rng(3)
    path = tmp_path / "klaw.db"
    vectors, rows = await build(path, rng)
    queries = np.stack([vectors[40], vectors[41], *unit_rows(rng, 4)])
    expected = await table_answers(path, queries)
    write_slot(path, rows[40][0], np.zeros(DIM, dtype=np.float32))
    write_slot(path, rows[41][0], vectors[200])
    statements = traced(monkeypatch)
    with caplog.at_level(logging.INFO):
        store = await open_store(path)
        try:
            assert await answers(store, queries) == expected
            assert [sql for sql, _ in statements if RESCORE_READ in sql]  # the table, for those two rows
            assert "disagree with the database" in caplog.text
            assert "m41" not in caplog.text and "m200" not in caplog.text
            assert await store.vectors.repair_floats() == 2
            assert np.array_equal(slot(path, rows[40][0]), vectors[40])
            assert np.array_equal(slot(path, rows[41][0]), vectors[41])
            statements.clear()
            assert await answers(store, queries) == expected
            assert not [sql for sql, _ in statements if RESCORE_READ in sql]
        finally:
            await store.aclose()


async def test_rowids_lost_after_a_crash_are_read_from_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power cut may keep records whose entries in `-rowids` it lost, or entries past the last whole
    record: the first are read back from the records, the second dropped; the search still reads the file."""
    rng = np.random.default_rng(8)
    path = tmp_path / "klaw.db"
    vectors, rows = await build(path, rng)
    queries = np.stack([vectors[-1], vectors[-2], vectors[10]])
    expected = await table_answers(path, queries)
    listed = FloatFile.beside(path).rowids_path
    os.truncate(listed, 8 * (ROWS - 100))
    floats = FloatFile.beside(path).path
    os.truncate(floats, floats.stat().st_size - RECORD // 2)  # the last record cut short: it is not there
    statements = traced(monkeypatch)
    store = await open_store(path)
    try:
        assert await answers(store, queries) == expected
        rescores = [bindings for sql, bindings in statements if RESCORE_READ in sql]
        assert rescores == [(f"[{rows[-1][0]}]",)]  # only the cut record is read from the table
    finally:
        await store.aclose()
    assert np.fromfile(listed, dtype="<i8").tolist()[: ROWS - 1] == [rowid for rowid, _ in rows[:-1]]


async def test_a_put_rolled_back_after_its_file_write_leaves_no_wrong_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slot is written before the commit: a put that then fails leaves a row no search asks for,
    and its retry (here with other floats, as a re-embedding could give) writes the slot again."""
    rng = np.random.default_rng(4)
    path = tmp_path / "klaw.db"
    vectors, _ = await build(path, rng)
    store = await open_store(path)
    try:
        stored = await store.messages.append_many(
            [MessageRecord(chat=ALICE, role=Role.USER, content="late", created_at=T0 + timedelta(days=2))]
        )
        first, second = unit_rows(rng, 2)
        real_pay_all = JobLedger.pay_all

        def failing(self: JobLedger, connection: apsw.Connection, paid: object) -> object:
            raise apsw.IOError("disk I/O error")

        monkeypatch.setattr(JobLedger, "pay_all", failing)
        with pytest.raises(apsw.IOError):
            await store.vectors.put([(stored[0].rowid, first)])
        assert np.array_equal(slot(path, stored[0].rowid), first)  # written, then rolled back in the table
        monkeypatch.setattr(JobLedger, "pay_all", real_pay_all)
        assert await store.vectors.put([(stored[0].rowid, second)]) == 1
        assert np.array_equal(slot(path, stored[0].rowid), second)
        hits = await store.search.nearest(ALICE, second, limit=3)
        assert hits[0].message.record.content == "late"
        assert hits[0].score == pytest.approx(0.0, abs=1e-6)
    finally:
        await store.aclose()
    assert await answers_after_reopen(path, np.stack([second, vectors[3]])) == await table_answers(
        path, np.stack([second, vectors[3]])
    )


async def answers_after_reopen(path: Path, queries: npt.NDArray[np.float32]) -> list[list[tuple[str, float | None]]]:
    store = await open_store(path)
    try:
        return await answers(store, queries)
    finally:
        await store.aclose()


_PUTTER = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import UTC, datetime, timedelta
    import numpy as np
    from klaw.store.records import ChatRef, MessageRecord, Role
    from klaw.store.sqlite.store import SqliteStore

    async def main() -> None:
        store = await SqliteStore.open(__import__("pathlib").Path(sys.argv[1]), vector_cache_bytes=64 << 20)
        await store.vectors.bind_embedder("test", 16)
        rng = np.random.default_rng(9)
        for i in range(100000):
            record = MessageRecord(chat=ChatRef("console", "alice"), role=Role.USER, content=f"k{i}",
                                   created_at=datetime(2026, 2, 1, tzinfo=UTC) + timedelta(seconds=i))
            stored = await store.messages.append_many([record])
            row = rng.standard_normal(16).astype(np.float32)
            await store.vectors.put([(stored[0].rowid, row / np.linalg.norm(row))])
            if i == 20:
                print("putting", flush=True)

    asyncio.run(main())
    """
)


async def test_killed_mid_puts_the_file_agrees_with_the_table(tmp_path: Path) -> None:
    """kill -9 of a process storing vectors: every vector the table committed has its row in the file
    (each slot is written before its commit), and searches answer as from the table."""
    rng = np.random.default_rng(5)
    path = tmp_path / "klaw.db"
    await build(path, rng)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _PUTTER,
        str(path),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    assert (await child.stdout.readline()).strip() == b"putting"
    child.send_signal(signal.SIGKILL)
    await child.wait()
    connection = apsw.Connection(str(path))
    connection.enable_load_extension(True)
    import sqlite_vec

    connection.load_extension(sqlite_vec.loadable_path())
    stored = connection.execute("SELECT rowid, embedding FROM vec_messages").fetchall()
    connection.close()
    assert len(stored) > ROWS + 20
    for rowid, blob in stored:
        assert isinstance(rowid, int) and isinstance(blob, bytes)
        assert slot(path, rowid).tobytes() == blob
    queries = unit_rows(rng, 4)
    assert await answers_after_reopen(path, queries) == await table_answers(path, queries)


@pytest.mark.parametrize("harm", ["missing", "damaged", "another binding"])
async def test_a_missing_or_damaged_file_is_started_again_and_said_so(
    tmp_path: Path, harm: str, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(6)
    path = tmp_path / "klaw.db"
    vectors, rows = await build(path, rng)
    queries = unit_rows(rng, 4)
    expected = await table_answers(path, queries)
    floats = FloatFile.beside(path).path
    if harm == "missing":
        floats.unlink()
    elif harm == "damaged":
        floats.write_bytes(b"\x00garbage" * 1000)
    with caplog.at_level(logging.INFO):
        if harm == "another binding":  # the table rebound: a file of the old binding is not its rows
            store = await SqliteStore.open(path, vector_cache_bytes=64 << 20)
            await store.db.run(lambda c: c.execute("UPDATE index_meta SET created_at = created_at + 1"))
            await store.vectors.bind_embedder("test", DIM)
        else:
            store = await open_store(path)
        try:
            assert await answers(store, queries) == expected
            assert f"the float vectors file {floats.name}" in caplog.text
            assert "m1" not in caplog.text
            assert floats.stat().st_mode & 0o777 == 0o600
            assert not slot(path, rows[3][0]).any()  # started empty
            assert await store.vectors.fill_floats(batch=64) == ROWS  # what an engine's start does after warming
            assert "wrote 300 vectors to klaw.db.floats from the database" in caplog.text
            assert all(np.array_equal(slot(path, rowid), vectors[i]) for i, (rowid, _) in enumerate(rows))
            assert await store.vectors.fill_floats() == 0
        finally:
            await store.aclose()


async def test_reindex_moves_its_builds_file_in_and_a_discarded_build_leaves_none(tmp_path: Path) -> None:
    live = tmp_path / "klaw.db"
    rebuild = SqliteRebuild(live)
    rng = np.random.default_rng(7)
    await build(live, rng)
    old_rows = FloatFile.beside(live).path.read_bytes()
    build_vectors, build_rows = await build(rebuild.location, rng)
    assert FloatFile.beside(rebuild.location).path.exists()
    rebuild.swap_into_place(keep_backup=False)
    assert not FloatFile.beside(rebuild.location).path.exists()
    assert FloatFile.beside(live).path.read_bytes() != old_rows
    assert np.array_equal(slot(live, build_rows[9][0]), build_vectors[9])

    await build(rebuild.location, rng)
    rebuild.discard()
    assert not FloatFile.beside(rebuild.location).path.exists()
