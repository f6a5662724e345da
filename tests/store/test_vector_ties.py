"""A chat's vector search answers what exact float search over the scope's vectors answers, ties by
rowid included, on both backends (decision 242: the int8 scan's best rows are chosen by a sampled
threshold, not by partitioning every score)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role

ALICE = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 32


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


async def write(storage: Storage, vectors: npt.NDArray[np.float32], start: int) -> list[int]:
    """One message a minute from minute `start`, each with its vector; their rowids."""
    stored = await storage.messages.append_many(
        [
            MessageRecord(ALICE, Role.USER, f"note {start + i}", created_at=T0 + timedelta(minutes=start + i))
            for i in range(len(vectors))
        ]
    )
    rowids = [message.rowid for message in stored]
    await storage.vectors.put(list(zip(rowids, vectors, strict=True)))
    return rowids


async def test_tied_vectors_are_answered_by_rowid_as_exact_search_does(storage: Storage) -> None:
    """600 messages hold the very vector asked for, more than the shortlist of 5 hits (40 rows) takes:
    exact search answers the 5 first by rowid. The int8 shortlist used to take any 40 of the 600 (a
    partition leaves ties to chance), so the hits were 5 of those, rarely the first."""
    rng = np.random.default_rng(3)
    await storage.vectors.bind_embedder("test", DIM)
    others = unit_rows(rng, 2400)
    asked = unit_rows(rng, 1)[0]
    vectors = others.copy()
    tied_at = np.sort(rng.choice(len(vectors), 600, replace=False))
    vectors[tied_at] = asked
    rowids = await write(storage, vectors, 0)
    hits = await storage.search.nearest(ALICE, asked, limit=5)
    assert [hit.message.rowid for hit in hits] == [rowids[i] for i in tied_at[:5]]


async def test_a_scoped_search_equals_exact_float_search_over_the_scope(storage: Storage) -> None:
    """Two segments and a time range: every hit and its order are exact float search's over the vectors
    the scope keeps (the past segment and rows outside the range never answer)."""
    rng = np.random.default_rng(4)
    await storage.vectors.bind_embedder("test", DIM)
    past = unit_rows(rng, 1500)
    past_rowids = await write(storage, past, 0)
    await storage.messages.append(
        MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0 + timedelta(minutes=1500))
    )
    segment = (await storage.segments.current(ALICE)).id
    current = unit_rows(rng, 3000)
    current_rowids = await write(storage, current, 1501)
    since, until = T0 + timedelta(minutes=2000), T0 + timedelta(minutes=4000)
    minutes = np.arange(1501, 4501)
    in_range = (minutes >= 2000) & (minutes < 4000)
    for query in unit_rows(rng, 4):
        for scoped, rows, kept in (
            ({"segment_id": segment}, current, np.ones(len(current), dtype=bool)),
            ({"segment_id": segment, "since": since, "until": until}, current, in_range),
            ({"before_segment_id": segment}, past, np.ones(len(past), dtype=bool)),
        ):
            ids = np.asarray(current_rowids if rows is current else past_rowids)[kept]
            distances = 1.0 - rows[kept] @ query
            expected = ids[np.lexsort((ids, distances))][:20].tolist()
            hits = await storage.search.nearest(ALICE, query, limit=20, **scoped)
            assert [hit.message.rowid for hit in hits] == expected
