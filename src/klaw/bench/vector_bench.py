"""`klaw bench vectors`: per-chat search latency of the real store at scale.

Builds a throwaway klaw.db through the store's own append and vector paths (random unit vectors:
latency does not depend on what the vectors mean), then times per-chat KNN (sqlite-vec, messages
fetched) and full-text queries, beside a numpy brute-force floor over the same vectors. Recall of
the KNN against the exact answer is reported too, so speed is never bought with wrong answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from klaw.bench.exact_top_k import numpy_top_k, unit_rows
from klaw.bench.stats import Latency
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

WORDS = (
    "garden",
    "dinner",
    "travel",
    "project",
    "meeting",
    "doctor",
    "birthday",
    "concert",
    "guitar",
    "painting",
    "weekend",
    "coffee",
    "train",
    "holiday",
    "budget",
    "recipe",
    "running",
    "marathon",
    "book",
    "movie",
    "sister",
    "brother",
    "friend",
    "school",
    "camping",
    "beach",
    "mountain",
    "river",
    "city",
    "museum",
    "piano",
    "dog",
    "cat",
    "kitten",
    "puppy",
    "flight",
    "hotel",
    "apartment",
    "rent",
    "salary",
    "interview",
    "job",
)


@dataclass(frozen=True)
class VectorBenchResult:
    rows: int
    chats: int
    dim: int
    k: int
    knn: Latency
    full_text: Latency
    numpy_floor: Latency
    recall_at_k: float
    insert_rows_per_s: float


async def measure_vector_search(
    db_path: Path,
    *,
    rows: int = 100_000,
    chats: int = 1,
    dim: int = 384,
    k: int = 20,
    queries: int = 200,
    seed: int = 7,
    progress: Callable[[str, int, int], None] | None = None,
) -> VectorBenchResult:
    rng = np.random.default_rng(seed)
    all_chats = [ChatRef("bench", f"chat-{i}") for i in range(chats)]
    chat = all_chats[0]  # queries go to one chat; the others share the table (vec0 partitions)
    vectors = unit_rows(rng.standard_normal((rows, dim), dtype=np.float32))
    store = await SqliteStore.open(db_path)
    try:
        await store.vectors.bind_embedder(f"bench-random-{dim}", dim)
        start = time.perf_counter()
        rowids: list[int] = []
        batch = 5000
        t0 = datetime(2025, 1, 1, tzinfo=UTC)
        for first in range(0, rows, batch):
            count = min(batch, rows - first)
            records = [
                MessageRecord(
                    chat=all_chats[(first + i) % chats],
                    role=Role.USER,
                    content=" ".join(rng.choice(WORDS, size=12)),
                    created_at=t0 + timedelta(seconds=first + i),
                )
                for i in range(count)
            ]
            stored = await store.messages.append_many(records)
            rowids.extend(s.rowid if s.record.chat == chat else -1 for s in stored)
            await store.vectors.put(list(zip([s.rowid for s in stored], vectors[first : first + count], strict=True)))
            if progress:
                progress("build", first + count, rows)
        insert_rate = rows / (time.perf_counter() - start)

        query_vectors = unit_rows(rng.standard_normal((queries, dim), dtype=np.float32))
        knn_times, numpy_times, recalls, fts_times = [], [], [], []
        in_chat = np.asarray([r != -1 for r in rowids])
        chat_vectors = vectors[in_chat]
        rowid_array = np.asarray(rowids)[in_chat]
        for i, query in enumerate(query_vectors):
            t = time.perf_counter()
            hits = await store.search.nearest(chat, query, limit=k)
            knn_times.append(time.perf_counter() - t)

            t = time.perf_counter()
            exact = numpy_top_k(chat_vectors, query, k)
            numpy_times.append(time.perf_counter() - t)
            found = {h.message.rowid for h in hits}
            recalls.append(len(found & set(rowid_array[exact].tolist())) / k)

            words = " ".join(rng.choice(WORDS, size=4))
            t = time.perf_counter()
            await store.search.full_text(chat, words, limit=k)
            fts_times.append(time.perf_counter() - t)
            if progress:
                progress("query", i + 1, queries)
    finally:
        await store.aclose()
    return VectorBenchResult(
        rows=rows,
        chats=chats,
        dim=dim,
        k=k,
        knn=Latency.of(knn_times),
        full_text=Latency.of(fts_times),
        numpy_floor=Latency.of(numpy_times),
        recall_at_k=float(np.mean(recalls)),
        insert_rows_per_s=insert_rate,
    )
