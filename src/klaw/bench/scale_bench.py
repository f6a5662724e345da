"""`klaw bench scale`: auto-RAG search latency on chats of 10k, 100k (and 1M) messages.

One chat of N messages is built per size: Zipfian text (`corpus.py`) through the store's append
path, and random unit vectors of the configured embedder's size (search cost does not depend on
what vectors mean, and embedding 100k messages would take minutes). Queries then go through the
production auto-RAG path (`AutoRagService.recall` → `HybridSearch` → store KNN + FTS5 + fusion),
scoped to the segment, with the newest 20 messages as the window:

- including the query embedding: the configured embedder embeds each query;
- excluding it: the same queries with their vectors computed beforehand;
- a numpy brute-force floor: one matrix product + top-k over the same vectors in memory, on one
  thread, and split over as many threads as the search may use (`database.vectorSearchThreads`):
  the search is compared with the second, which had the same cores.

The search without the query embedding is also timed in CPU, every thread of the process: its
sides run on several threads at once, so on a loaded machine that figure moves far less than the
wall time, and set against the CPUs it is the least wall time the search can take (decision 242).

The first search of a chat loads its vectors into memory (`ChatVectorCache`, int8); that one-off
cost is reported on its own rather than mixed into the percentiles, and so is the first search after
the store is closed (which saves the chat's int8 copy beside the database) and opened again.

On SQLite the full-text index is merged after the fill, as a running engine merges it in the
background after bulk appends (decision 251): the segments before and after, and the time it took,
are reported, and the searches meet the index a person's engine searches.

The same figures come from either backend (`database.backend`, `bench_store.py`): on PostgreSQL the
chat is built in a schema of its own, dropped at the end (its messages written in bulk, `pg_fill.py`);
its first search loads the chat's int8 copy from the server (decision 221), which is not saved beside
anything, so the close-and-reopen figure is SQLite's only.

Exactness and the physical floor: each query's vector search (top 20 in the segment) is compared
with exact float search over the same vectors (recall@20), and the bytes one search scans (int8
codes, row scales, the segment column its scope reads) are set against the memory bandwidth
measured with a numpy copy at the start (`bandwidth.py`).

The chat also has 500 past segments of 20 summarized exchanges each (`past_bench.py`), written before
the big current segment: past-conversation retrieval is timed alone and together with auto-RAG ("all
layers", what a turn's context costs in retrieval), both without the query embedding. With
`past_share` > 0 that share of the N messages is written in the past segments (evenly, before each
one's summaries) and the current segment holds the rest: a chat whose past is large, which the
`messages` stage of past conversations searches directly (full text and vectors of every past segment).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from klaw.bench.bandwidth import Bandwidth, measure_bandwidth
from klaw.bench.bench_store import bench_store
from klaw.bench.corpus import BENCH_START, MESSAGE_SPACING_S, ZipfCorpus
from klaw.bench.exact_top_k import numpy_top_k, threaded_top_k, unit_rows
from klaw.bench.past_bench import BENCH_RAG, PAST_SEGMENTS, add_past_segments, past_retriever
from klaw.bench.search_split import SplitFigures, timed_store
from klaw.bench.stats import Latency
from klaw.config import AutoRagConfig, DatabaseConfig
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.embedder.protocol import Embedder, Vectors, embed_queries
from klaw.memory.hybrid_search import HybridSearch
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord
from klaw.store.sqlite.fts_merge import merged, segment_count
from klaw.store.sqlite.store import SqliteStore

Progress = Callable[[str, int, int], None]
CHAT = ChatRef("bench", "scale")
WINDOW = 20
BATCH = 5000
T0 = BENCH_START


@dataclass(frozen=True)
class ScaleResult:
    messages: int
    backend: str
    dim: int
    build_rows_per_s: float
    first_search_ms: float  # includes loading the chat's vectors into memory
    search_with_embedding: Latency
    search_without_embedding: Latency
    query_embedding: Latency
    numpy_floor: Latency  # one thread
    recalled_per_query: float
    past_segments: int = 0
    summaries: int = 0
    past_messages: int = 0  # of `messages`, written in the past segments (the rest in the current one)
    past_conversations: Latency | None = None  # past-conversation retrieval alone, no query embedding
    all_layers: Latency | None = None  # auto-RAG + past conversations, no query embedding
    past_shown_per_query: float = 0.0  # past segments placed in the block
    search_threads: int = 1
    numpy_floor_threaded: Latency | None = None  # split over `search_threads` threads
    recall_at_20: float = 1.0  # store KNN (int8 + exact rescore) against exact float search
    vector_bytes: int = 0  # the chat's vectors in memory (int8 codes and their columns)
    scanned_bytes_per_query: int = 0  # what one segment-scoped search reads
    bandwidth: Bandwidth | None = None
    bandwidth_floor_ms: float = 0.0  # scanned bytes / measured bandwidth (search threads)
    save_ms: float | None = None  # SQLite: closing the store saves the int8 copy beside the database
    reload_first_search_ms: float | None = None  # SQLite: first search after opening again (loads the copy)
    split: SplitFigures | None = None  # auto-RAG without embedding: vector side, full text, neighbours, rest
    search_cpu: Latency | None = None  # the same searches' CPU, every thread of the process (decision 242)
    full_text_segments: tuple[int, int] | None = None  # SQLite: the index's segments after the fill, after merging
    full_text_merge_s: float = 0.0  # SQLite: merging them, as the engine does in the background (decision 251)


class PrecomputedEmbedder:
    """Answers with vectors computed before timing starts, so a search is timed without embedding."""

    def __init__(self, model_id: str, vectors: dict[str, npt.NDArray[np.float32]]) -> None:
        self.model_id = model_id
        self._vectors = vectors
        self.dim = len(next(iter(vectors.values())))

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self._vectors[text] for text in texts])

    async def aclose(self) -> None:
        return None


@dataclass
class _Built:
    """The bench chat once built: its vectors in memory (for the floors and exact search) and rowids."""

    matrix: npt.NDArray[np.float32]
    rowids: npt.NDArray[np.int64]
    rows_per_s: float
    past_segments: int
    summaries: int
    past_messages: int


async def measure_scale(
    db_path: Path,
    embedder: Embedder,
    *,
    messages: int,
    queries: int = 200,
    database: DatabaseConfig | None = None,
    past_segments: int = PAST_SEGMENTS,
    past_share: float = 0.0,
    seed: int = 11,
    progress: Progress | None = None,
) -> ScaleResult:
    """Build the chat on `database.backend` (SQLite at `db_path` by default) and time its searches;
    `past_share` of the `messages` go to the past segments."""
    database = database or DatabaseConfig()
    threads = database.vector_search_threads
    rng = np.random.default_rng(seed)
    corpus = ZipfCorpus(seed=seed)
    dim = embedder.dim
    bandwidth = measure_bandwidth(threads)
    floor_pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="klaw-bench-floor")
    save: float | None = None
    reload: float | None = None
    try:
        async with bench_store(db_path, database) as store:
            past = _past_counts(messages, past_segments, past_share)
            built = await _build(store, embedder, corpus, rng, messages, past, progress)
            merge = await _merge_full_text(store)
            rowids = built.rowids
            segment = await store.segments.current(CHAT)
            window = frozenset(rowids[-WINDOW:].tolist())
            texts = corpus.sentences(queries, min_words=6, max_words=20)
            config = AutoRagConfig(relevance_threshold=2.0)  # time the whole path: nothing cut by the gate
            live = AutoRagService(config, HybridSearch(store, embedder))

            embed_times = []
            query_vectors: dict[str, npt.NDArray[np.float32]] = {}
            for text in texts:
                t = time.perf_counter()
                query_vectors[text] = (await embed_queries(embedder, [text]))[0]
                embed_times.append(time.perf_counter() - t)
            precomputed = PrecomputedEmbedder(embedder.model_id, query_vectors)
            timed, split = timed_store(store)  # the same store, its search calls timed (`search_split.py`)
            offline = AutoRagService(config, HybridSearch(timed, precomputed))
            offline_past = past_retriever(store, precomputed)

            t = time.perf_counter()
            await offline.recall(CHAT, segment.id, texts[0], window)
            first_search = time.perf_counter() - t
            split.clear()

            with_embedding, without_embedding, floor, floor_threaded, recalled = [], [], [], [], []
            cpu: list[float] = []
            recall: list[float] = []
            past_alone: list[float] = []
            all_layers: list[float] = []
            shown: list[int] = []
            for i, text in enumerate(texts):
                t = time.perf_counter()
                await live.recall(CHAT, segment.id, text, window)
                with_embedding.append(time.perf_counter() - t)
                t, c = time.perf_counter(), time.process_time()
                found = await offline.recall(CHAT, segment.id, text, window)
                without_embedding.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                split.take(without_embedding[-1])
                recalled.append(len(found))
                t = time.perf_counter()
                retrieved = await offline_past.retrieve(CHAT, segment.id, text, BENCH_RAG.max_tokens)
                past_alone.append(time.perf_counter() - t)
                shown.append(len(retrieved.shown) if retrieved is not None else 0)
                all_layers.append(without_embedding[-1] + past_alone[-1])
                t = time.perf_counter()
                numpy_top_k(built.matrix, query_vectors[text], 20)
                floor.append(time.perf_counter() - t)
                t = time.perf_counter()
                exact = threaded_top_k(floor_pool, threads, built.matrix, query_vectors[text], 20)
                floor_threaded.append(time.perf_counter() - t)
                knn = await store.search.nearest(CHAT, query_vectors[text], limit=20, segment_id=segment.id)
                recall.append(len({h.message.rowid for h in knn} & set(rowids[exact].tolist())) / 20)
                if progress:
                    progress("search", i + 1, len(texts))
            vector_bytes, scanned = await _vector_bytes(store, dim)
            if isinstance(store, SqliteStore):
                save, reload = await _reopened(store, db_path, database, embedder, query_vectors[texts[0]], segment.id)
    finally:
        floor_pool.shutdown()
    return ScaleResult(
        messages=messages,
        backend=database.backend,
        dim=dim,
        build_rows_per_s=built.rows_per_s,
        first_search_ms=first_search * 1000,
        search_with_embedding=Latency.of(with_embedding),
        search_without_embedding=Latency.of(without_embedding),
        query_embedding=Latency.of(embed_times),
        numpy_floor=Latency.of(floor),
        recalled_per_query=float(np.mean(recalled)),
        past_segments=built.past_segments,
        summaries=built.summaries,
        past_messages=built.past_messages,
        past_conversations=Latency.of(past_alone),
        all_layers=Latency.of(all_layers),
        past_shown_per_query=float(np.mean(shown)),
        search_threads=threads,
        numpy_floor_threaded=Latency.of(floor_threaded),
        recall_at_20=float(np.mean(recall)),
        vector_bytes=vector_bytes,
        scanned_bytes_per_query=scanned,
        bandwidth=bandwidth,
        bandwidth_floor_ms=bandwidth.floor_ms(scanned),
        save_ms=None if save is None else save * 1000,
        reload_first_search_ms=None if reload is None else reload * 1000,
        split=split.figures(),
        search_cpu=Latency.of(cpu),
        full_text_segments=None if merge is None else merge[0],
        full_text_merge_s=0.0 if merge is None else merge[1],
    )


def _past_counts(messages: int, segments: int, share: float) -> list[int]:
    """How many of `messages` each past segment holds: `share` of them, spread evenly."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"the past's share of the messages must be at least 0 and below 1, not {share}")
    total = round(messages * share)
    if total and not segments:
        raise ValueError("messages in past segments need at least one past segment")
    return [total // segments + (1 if number < total % segments else 0) for number in range(segments)]


async def _build(
    store: Storage,
    embedder: Embedder,
    corpus: ZipfCorpus,
    rng: np.random.Generator,
    messages: int,
    past: list[int],
    progress: Progress | None,
) -> _Built:
    """The past segments (with `past[n]` messages in segment n), then the rest of `messages` in the
    current one, with random unit vectors, through the store's own paths."""
    dim = embedder.dim
    past_total = sum(past)
    current = messages - past_total
    written = 0
    seconds = 0.0  # writing messages and their vectors (not the summaries)
    matrix: list[npt.NDArray[np.float32]] = []  # the vectors written, batch by batch

    async def write(count: int, start: datetime) -> list[int]:
        """`count` messages from `start` with their vectors, in batches; their rowids."""
        nonlocal written, seconds
        rowids: list[int] = []
        started = time.perf_counter()
        for first in range(0, count, BATCH):
            size = min(BATCH, count - first)
            vectors = unit_rows(rng.standard_normal((size, dim)).astype(np.float32))
            batch = await _append(store, corpus.chat_records(CHAT, first, size, start))
            await store.vectors.put(list(zip(batch, vectors, strict=True)))
            rowids += batch
            written += size
            if progress:
                progress("build", written, messages)
            matrix.append(vectors)
        seconds += time.perf_counter() - started
        return rowids

    async def fill(number: int, moment: datetime) -> datetime:
        await write(past[number], moment)
        return moment + timedelta(seconds=MESSAGE_SPACING_S * past[number])

    await store.vectors.bind_embedder(embedder.model_id, dim)
    history = await add_past_segments(
        store,
        CHAT,
        rng,
        embedder_id=embedder.model_id,
        dim=dim,
        start=T0 - timedelta(days=30, seconds=MESSAGE_SPACING_S * past_total),
        segments=len(past),
        fill=fill if past_total else None,
    )
    matrix.clear()  # the floors and exact search are over the current segment's vectors
    rowids = np.asarray(await write(current, T0), dtype=np.int64)
    rate = messages / seconds if seconds else 0.0
    current_matrix = np.concatenate(matrix) if matrix else np.empty((0, dim), dtype=np.float32)
    return _Built(current_matrix, rowids, rate, history.segments, history.summaries, past_total)


async def _merge_full_text(store: Storage) -> tuple[tuple[int, int], float] | None:
    """SQLite: the full-text index merged as a running engine merges it after bulk appends (in the
    background, `engine/full_text_upkeep.py`), so the searches meet what a person's would; its
    segments before and after, and the seconds it took. PostgreSQL has no segments to merge."""
    if not isinstance(store, SqliteStore):
        return None
    before = await store.db.run(segment_count)
    started = time.perf_counter()
    await store.db.run(merged)
    seconds = time.perf_counter() - started
    return (before, await store.db.run(segment_count)), seconds


async def _append(store: Storage, records: list[MessageRecord]) -> list[int]:
    """The store's own append; on PostgreSQL the same rows in bulk (`pg_fill.py` says why)."""
    if isinstance(store, SqliteStore):
        return [s.rowid for s in await store.messages.append_many(records)]
    from klaw.bench.pg_fill import append_conversation
    from klaw.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    return await append_conversation(store, records)


async def _vector_bytes(store: Storage, dim: int) -> tuple[int, int]:
    """The chat's vectors in klaw's memory, and the bytes one segment-scoped search reads: the int8
    codes, scale and segment id per row of the copy both backends scan (decision 221); PostgreSQL
    without a copy (`--vector-cache-mb 0`) reads the vector table in the server."""
    if isinstance(store, SqliteStore):
        return store.vector_cache.cached_bytes, await store.vectors.count() * (dim + 4 + 8)
    from klaw.store.postgres.connection import fetch_value
    from klaw.store.postgres.store import PostgresStore
    from klaw.store.postgres.vectors import MESSAGE_VECTORS

    assert isinstance(store, PostgresStore)
    cached = store.vector_cache.cached_bytes
    if cached:
        return cached, await store.vectors.count() * (dim + 4 + 8)
    async with store.db.connection() as connection:
        size = await fetch_value(connection, "SELECT pg_table_size(%s::regclass)", (MESSAGE_VECTORS,))
    return 0, int(size or 0)


async def _reopened(
    store: SqliteStore,
    db_path: Path,
    database: DatabaseConfig,
    embedder: Embedder,
    query: npt.NDArray[np.float32],
    segment_id: int,
) -> tuple[float, float]:
    """Seconds to close `store` (saving the int8 copy) and for the first search once opened again."""
    t = time.perf_counter()
    await store.aclose()
    save = time.perf_counter() - t
    reopened = await SqliteStore.open(
        db_path,
        vector_cache_bytes=database.vector_cache_mb * 1024 * 1024,
        vector_search_threads=database.vector_search_threads,
    )
    try:
        await reopened.vectors.bind_embedder(embedder.model_id, embedder.dim)
        t = time.perf_counter()
        await reopened.search.nearest(CHAT, query, limit=20, segment_id=segment_id)
        return save, time.perf_counter() - t
    finally:
        await reopened.aclose()
