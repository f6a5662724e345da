"""Reading large chats' vectors from sqlite-vec's chunk tables in bulk, for their first int8 copy.

Why: `SELECT rowid, embedding FROM vec_messages WHERE chat_key = ?` makes vec0 look each row up in
its `_rowids` table and open the chunk blob holding it (a 196 KB blob of 128 vectors, walked page by
page to the row's offset): ~30 µs a row, 31 s for a chat of 1M vectors before its first search
answered. vec0 keeps a chat's vectors in chunks of `chunk_size` slots, one row per chunk in each of
its shadow tables: `_chunks` (the chat in `partition00`, a validity bitmap, the slots' rowids as
int64), `_vector_chunks00` (the slots' float32 vectors, contiguous), `_metadatachunks00` and `01`
(`segment_id` and `created_at`, int64 a slot). Reading those rows whole, a few thousand of them for
1M vectors, and quantizing a block of slots at a time is bounded by copying the bytes.

Those tables are sqlite-vec's private layout (unchanged from 0.1.6, the oldest version klaw accepts,
to 0.1.10), so nothing read here is trusted unless it checks out (decision 236): the tables must
have exactly the columns named above and every blob the size its chunk implies; each chat's valid
slots must be as many as its messages with a vector in `_rowids` (so a vector whose message is gone
also sends the chat to the slow path, as before); and up to `SAMPLES` slots spread over what was
read must equal, byte for byte, what vec0 itself returns for their rowids. A chat that fails any of
this is left out of the answer, and the caller reads it row by row through vec0 as before; a failed
sample fails the whole read. tests/store/test_vector_chunks.py pins that the bulk path is the one
taken with the installed sqlite-vec, so an upgrade that changes the layout fails a test instead of
quietly making loads slow again.

Chats under `BULK_MIN_ROWS` vectors are left to the row path: vec0 gives each chat chunks of its own,
so a chat of 10 vectors has a whole chunk of mostly empty slots, and reading it whole costs more than
looking its rows up.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import apsw
import numpy as np
import numpy.typing as npt

from klaw.store.shared.vector_matrix import ChatMatrix
from klaw.store.shared.vector_quant import quantize_into
from klaw.store.sqlite.query import fetch_all

log = logging.getLogger(__name__)

BULK_MIN_ROWS = 1024
SAMPLES = 32
# Slots quantized at a time: their float32 rows (1.5 MB at 384 dims) stay in the CPU's cache.
BLOCK_ROWS = 1024
# Threads quantizing (each block in two halves) while the database thread reads the next block: on
# two cores the load's quantizing, most of its work, then takes about half the time.
QUANTIZE_THREADS = 2
LAYOUT = {
    "_chunks": ("chunk_id", "size", "sequence_id", "partition00", "validity", "rowids"),
    "_rowids": ("rowid", "id", "chunk_id", "chunk_offset"),
    "_vector_chunks00": ("rowid", "vectors"),
    "_metadatachunks00": ("rowid", "data"),
    "_metadatachunks01": ("rowid", "data"),
}
INT64 = np.dtype(np.int64)


@dataclass(frozen=True)
class _Chunk:
    chunk_id: int
    size: int
    slots: npt.NDArray[np.intp]  # the valid slots, in slot order
    places: npt.NDArray[np.intp]  # where each valid slot goes in its chat's rowid-ordered arrays


@dataclass(frozen=True)
class _Plan:
    rowids: npt.NDArray[np.int64]  # the chat's rowids, sorted
    chunks: list[_Chunk]


Sample = tuple[bytes, int, int]  # a slot's float32 bytes, segment and time, as read here


def read_chunked(connection: apsw.Connection, table: str, chat_keys: Sequence[int], dim: int) -> dict[int, ChatMatrix]:
    """Int8 copies of those of `chat_keys` that could be read in bulk (see module doc), each in
    rowid order with version 0 (the caller stamps it). Chats left out are for the row path.

    One read transaction: the chunks cannot change between the plan and the blobs."""
    large = [
        int(chat)
        for (chat,) in fetch_all(
            connection,
            "SELECT chat FROM messages WHERE chat IN (SELECT value FROM json_each(?))"
            " GROUP BY chat HAVING count(*) >= ?",
            (json.dumps(sorted(set(chat_keys))), BULK_MIN_ROWS),
        )
    ]
    if not large or not _layout_known(connection, table):
        return {}
    with connection:
        plans = _plan(connection, table, json.dumps(large))
        samples = _sample_places(plans)
        seen: dict[int, Sample] = {}
        pool = ThreadPoolExecutor(QUANTIZE_THREADS, thread_name_prefix="klaw-vector-load")
        blobs = _ChunkBlobs(connection, table, dim, pool)
        try:
            matrices = {}
            for chat, plan in plans.items():
                matrix = blobs.matrix(plan, samples.get(chat, np.zeros(0, dtype=np.intp)), seen)
                if matrix is not None:
                    matrices[chat] = matrix
        finally:
            blobs.close()
            pool.shutdown()
        if not _samples_match(connection, table, seen):
            return {}
    return matrices


class _ChunkBlobs:
    """The three blobs of each chunk (vectors, segments, times), read through reopened handles:
    `sqlite3_blob_open` by the chunk's rowid is how vec0 itself reads them."""

    def __init__(self, connection: apsw.Connection, table: str, dim: int, pool: ThreadPoolExecutor) -> None:
        self._connection = connection
        self._pool = pool  # quantizes each block in two halves while the next block is read
        self._names = (f"{table}_vector_chunks00", f"{table}_metadatachunks00", f"{table}_metadatachunks01")
        self._columns = ("vectors", "data", "data")
        self._handles: list[apsw.Blob] = []
        self._dim = dim

    def matrix(self, plan: _Plan, samples: npt.NDArray[np.intp], seen: dict[int, Sample]) -> ChatMatrix | None:
        """The chat's copy, quantized `BLOCK_ROWS` slots at a time; None when a blob is not the size
        its chunk implies."""
        matrix = ChatMatrix.for_load(len(plan.rowids), self._dim)
        matrix.rowids[: len(plan.rowids)] = plan.rowids
        sampled = np.zeros(len(plan.rowids), dtype=bool)
        sampled[samples] = True
        per_block = max(1, BLOCK_ROWS // max(chunk.size for chunk in plan.chunks))
        pending: list[Future[None]] = []
        try:
            for first in range(0, len(plan.chunks), per_block):
                block = plan.chunks[first : first + per_block]
                read = self._read(block)
                if read is None:
                    return None
                floats, segments, created = read
                places = np.concatenate([chunk.places for chunk in block])
                for i in np.flatnonzero(sampled[places]):  # before quantizing: it works in place
                    seen[int(plan.rowids[places[i]])] = (floats[i].tobytes(), int(segments[i]), int(created[i]))
                for done in pending:  # at most one block quantizing while the next is read
                    done.result()
                half = len(places) // 2
                pending = [
                    self._pool.submit(_store, matrix, floats[part], places[part], segments[part], created[part])
                    for part in (slice(0, half), slice(half, None))
                ]
        finally:
            for done in pending:
                done.result()
        matrix.size = len(plan.rowids)
        return matrix

    def _read(
        self, block: list[_Chunk]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """The valid slots of `block`'s chunks: float32 rows, segments, times."""
        slots = sum(chunk.size for chunk in block)
        floats = np.empty((slots, self._dim), dtype=np.float32)
        meta = np.empty((2, slots), dtype=INT64)
        valid: list[npt.NDArray[np.intp]] = []
        first = 0
        for chunk in block:
            end = first + chunk.size
            targets: tuple[npt.NDArray[np.generic], ...] = (floats[first:end], meta[0, first:end], meta[1, first:end])
            for blob, target in zip(self._open(chunk.chunk_id), targets, strict=True):
                if blob.length() != target.nbytes:
                    return None
                blob.read_into(target.data.cast("B"))
            valid.append(chunk.slots + first)
            first = end
        taken = np.concatenate(valid)
        if len(taken) == slots:
            return floats, meta[0], meta[1]
        return floats[taken], meta[0, taken], meta[1, taken]

    def _open(self, chunk_id: int) -> list[apsw.Blob]:
        if not self._handles:
            self._handles = [
                self._connection.blob_open("main", name, column, chunk_id, False)
                for name, column in zip(self._names, self._columns, strict=True)
            ]
        else:
            for handle in self._handles:
                handle.reopen(chunk_id)
        return self._handles

    def close(self) -> None:
        for handle in self._handles:
            handle.close()


def _store(
    matrix: ChatMatrix,
    floats: npt.NDArray[np.float32],
    places: npt.NDArray[np.intp],
    segments: npt.NDArray[np.int64],
    created: npt.NDArray[np.int64],
) -> None:
    """Quantize `floats` into the matrix at `places` (on a pool thread: numpy lets go of the GIL),
    first keeping them as they are when the matrix keeps a small chat's float rows."""
    run = _run(places)
    if matrix.floats is not None:
        matrix.floats[places if run is None else run] = floats
    if run is not None:  # the rows go to one stretch (a chat without deletions): quantize there
        quantize_into(floats, matrix.codes[run], matrix.scales[run])
        matrix.segments[run], matrix.created[run] = segments, created
    else:
        codes, scales = matrix.codes[places], matrix.scales[places]
        quantize_into(floats, codes, scales)
        matrix.codes[places], matrix.scales[places] = codes, scales
        matrix.segments[places], matrix.created[places] = segments, created


def _run(places: npt.NDArray[np.intp]) -> slice | None:
    """`places` as a slice when they run in order without a gap."""
    if len(places) and places[-1] - places[0] == len(places) - 1 and np.all(np.diff(places) == 1):
        return slice(int(places[0]), int(places[-1]) + 1)
    return None


def _layout_known(connection: apsw.Connection, table: str) -> bool:
    for suffix, columns in LAYOUT.items():
        found = tuple(str(row[1]) for row in fetch_all(connection, f"PRAGMA table_info({table}{suffix})"))
        if found != columns:
            log.info("%s%s is not the sqlite-vec layout klaw reads in bulk: loading vectors row by row", table, suffix)
            return False
    return True


def _plan(connection: apsw.Connection, table: str, keys: str) -> dict[int, _Plan]:
    """Each usable chat's chunks (valid slots and where they go) and sorted rowids; chats whose
    chunks do not check out, or are too small for the bulk path, are left out."""
    expected = {
        int(chat): int(count)
        for chat, count in fetch_all(
            connection,
            f"SELECT m.chat, count(*) FROM messages m JOIN {table}_rowids r ON r.rowid = m.rowid"
            " WHERE m.chat IN (SELECT value FROM json_each(?)) GROUP BY m.chat",
            (keys,),
        )
    }
    by_chat: dict[int, list[tuple[int, int, npt.NDArray[np.intp], npt.NDArray[np.int64]]]] = {}
    broken: set[int] = set()
    for chunk_id, chat, size, validity, rowids in connection.execute(
        f"SELECT chunk_id, partition00, size, validity, rowids FROM {table}_chunks"
        " WHERE partition00 IN (SELECT value FROM json_each(?)) ORDER BY chunk_id",
        (keys,),
    ):
        chat, size = int(chat), int(size)
        if size <= 0 or len(validity) * 8 < size or len(rowids) != size * 8:
            broken.add(chat)
            continue
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size]
        slots = np.flatnonzero(bits)
        by_chat.setdefault(chat, []).append((int(chunk_id), size, slots, np.frombuffer(rowids, dtype=INT64)[slots]))
    plans: dict[int, _Plan] = {}
    for chat, parts in by_chat.items():
        ids = np.concatenate([part[3] for part in parts])
        if chat in broken or len(ids) < BULK_MIN_ROWS or len(ids) != expected.get(chat, -1):
            continue
        order = np.argsort(ids, kind="stable")
        if not np.all(np.diff(ids[order]) > 0):
            continue  # a rowid in two slots: not a layout this reader understands
        places = np.empty(len(ids), dtype=np.intp)
        places[order] = np.arange(len(ids))
        chunks, first = [], 0
        for chunk_id, size, slots, _ in parts:
            chunks.append(_Chunk(chunk_id, size, slots, places[first : first + len(slots)]))
            first += len(slots)
        plans[chat] = _Plan(ids[order], chunks)
    return plans


def _sample_places(plans: dict[int, _Plan]) -> dict[int, npt.NDArray[np.intp]]:
    """Up to `SAMPLES` places spread evenly over every chat's rows together (the first and last included)."""
    total = sum(len(plan.rowids) for plan in plans.values())
    if total == 0:
        return {}
    picks = np.unique(np.linspace(0, total - 1, min(SAMPLES, total)).astype(np.intp))
    samples: dict[int, npt.NDArray[np.intp]] = {}
    first = 0
    for chat, plan in plans.items():
        samples[chat] = picks[(picks >= first) & (picks < first + len(plan.rowids))] - first
        first += len(plan.rowids)
    return samples


def _samples_match(connection: apsw.Connection, table: str, seen: dict[int, Sample]) -> bool:
    """Whether every sampled slot read here is what vec0 answers for its rowid."""
    for rowid, sample in seen.items():
        row = connection.execute(
            f"SELECT embedding, segment_id, created_at FROM {table} WHERE rowid = ?", (rowid,)
        ).fetchone()
        if row is None or sample != (bytes(row[0]), int(row[1]), int(row[2])):
            log.warning("%s's chunks do not read as sqlite-vec reads them: loading vectors row by row", table)
            return False
    return True
