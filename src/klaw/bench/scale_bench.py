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

The first search of a chat loads its vectors into memory (`ChatVectorCache`, int8); that one-off
cost is reported on its own rather than mixed into the percentiles, and so is the first search after
the store is closed (which saves the chat's int8 copy beside the database) and opened again.

Exactness and the physical floor: each query's vector search (top 20 in the segment) is compared
with exact float search over the same vectors (recall@20), and the bytes one search scans (int8
codes, row scales, the segment column its scope reads) are set against the memory bandwidth
measured with a numpy copy at the start (`bandwidth.py`).

The chat also has 500 past segments of 20 summarized exchanges each (`past_bench.py`), written before
the big current segment: past-conversation retrieval is timed alone and together with auto-RAG ("all
layers", what a turn's context costs in retrieval), both without the query embedding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from klaw.bench.bandwidth import Bandwidth, measure_bandwidth
from klaw.bench.corpus import BENCH_START, ZipfCorpus
from klaw.bench.past_bench import BENCH_RAG, PAST_SEGMENTS, add_past_segments, past_retriever
from klaw.bench.stats import Latency
from klaw.config import AutoRagConfig
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.embedder.protocol import Embedder, Vectors, embed_queries
from klaw.memory.hybrid_search import HybridSearch
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_matrix import SPLIT_MIN_ROWS

Progress = Callable[[str, int, int], None]
CHAT = ChatRef("bench", "scale")
WINDOW = 20
BATCH = 5000
T0 = BENCH_START


@dataclass(frozen=True)
class ScaleResult:
    messages: int
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
    save_ms: float = 0.0  # closing the store: saving the int8 copy beside the database
    reload_first_search_ms: float = 0.0  # first search after opening again (loads the saved copy)


class PrecomputedEmbedder:
    """Answers with vectors computed before timing starts, so a search is timed without embedding."""

    def __init__(self, model_id: str, vectors: dict[str, npt.NDArray[np.float32]]) -> None:
        self._model_id = model_id
        self._vectors = vectors
        self._dim = len(next(iter(vectors.values())))

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self._vectors[text] for text in texts])

    async def aclose(self) -> None:
        return None


async def measure_scale(
    db_path: Path,
    embedder: Embedder,
    *,
    messages: int,
    queries: int = 200,
    vector_cache_bytes: int = 256 * 1024 * 1024,
    vector_search_threads: int = 2,
    past_segments: int = PAST_SEGMENTS,
    seed: int = 11,
    progress: Progress | None = None,
) -> ScaleResult:
    rng = np.random.default_rng(seed)
    corpus = ZipfCorpus(seed=seed)
    dim = embedder.dim
    bandwidth = measure_bandwidth(vector_search_threads)
    store = await SqliteStore.open(
        db_path, vector_cache_bytes=vector_cache_bytes, vector_search_threads=vector_search_threads
    )
    floor_pool = ThreadPoolExecutor(max_workers=vector_search_threads, thread_name_prefix="klaw-bench-floor")
    try:
        await store.vectors.bind_embedder(embedder.model_id, dim)
        past = await add_past_segments(
            store,
            CHAT,
            rng,
            embedder_id=embedder.model_id,
            dim=dim,
            start=T0 - timedelta(days=30),
            segments=past_segments,
        )
        matrix = np.empty((messages, dim), dtype=np.float32)
        rowids = np.empty(messages, dtype=np.int64)
        started = time.perf_counter()
        for first in range(0, messages, BATCH):
            count = min(BATCH, messages - first)
            records = corpus.chat_records(CHAT, first, count, T0)
            stored = await store.messages.append_many(records)
            vectors = _unit_rows(rng.standard_normal((count, dim)).astype(np.float32))
            matrix[first : first + count] = vectors
            rowids[first : first + count] = [s.rowid for s in stored]
            await store.vectors.put(list(zip(rowids[first : first + count].tolist(), vectors, strict=True)))
            if progress:
                progress("build", first + count, messages)
        build_rate = messages / (time.perf_counter() - started)

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
        offline = AutoRagService(config, HybridSearch(store, precomputed))
        offline_past = past_retriever(store, precomputed)

        t = time.perf_counter()
        await offline.recall(CHAT, segment.id, texts[0], window)
        first_search = time.perf_counter() - t

        with_embedding, without_embedding, floor, floor_threaded, recalled = [], [], [], [], []
        recall: list[float] = []
        past_alone: list[float] = []
        all_layers: list[float] = []
        shown: list[int] = []
        for i, text in enumerate(texts):
            t = time.perf_counter()
            await live.recall(CHAT, segment.id, text, window)
            with_embedding.append(time.perf_counter() - t)
            t = time.perf_counter()
            found = await offline.recall(CHAT, segment.id, text, window)
            without_embedding.append(time.perf_counter() - t)
            recalled.append(len(found))
            t = time.perf_counter()
            retrieved = await offline_past.retrieve(CHAT, segment.id, text, BENCH_RAG.max_tokens)
            past_alone.append(time.perf_counter() - t)
            shown.append(len(retrieved.shown) if retrieved is not None else 0)
            all_layers.append(without_embedding[-1] + past_alone[-1])
            t = time.perf_counter()
            _numpy_top_k(matrix, query_vectors[text], 20)
            floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            exact = _threaded_top_k(floor_pool, vector_search_threads, matrix, query_vectors[text], 20)
            floor_threaded.append(time.perf_counter() - t)
            knn = await store.search.nearest(CHAT, query_vectors[text], limit=20, segment_id=segment.id)
            recall.append(len({h.message.rowid for h in knn} & set(rowids[exact].tolist())) / 20)
            if progress:
                progress("search", i + 1, len(texts))
        vector_bytes = store.vector_cache.cached_bytes
        scanned = await store.vectors.count() * (dim + 4 + 8)  # codes, scale, segment id per row
        t = time.perf_counter()
        await store.aclose()
        save = time.perf_counter() - t
        store = await SqliteStore.open(
            db_path, vector_cache_bytes=vector_cache_bytes, vector_search_threads=vector_search_threads
        )
        await store.vectors.bind_embedder(embedder.model_id, dim)
        t = time.perf_counter()
        await store.search.nearest(CHAT, query_vectors[texts[0]], limit=20, segment_id=segment.id)
        reload = time.perf_counter() - t
    finally:
        floor_pool.shutdown()
        await store.aclose()
    return ScaleResult(
        messages=messages,
        dim=dim,
        build_rows_per_s=build_rate,
        first_search_ms=first_search * 1000,
        search_with_embedding=Latency.of(with_embedding),
        search_without_embedding=Latency.of(without_embedding),
        query_embedding=Latency.of(embed_times),
        numpy_floor=Latency.of(floor),
        recalled_per_query=float(np.mean(recalled)),
        past_segments=past.segments,
        summaries=past.summaries,
        past_conversations=Latency.of(past_alone),
        all_layers=Latency.of(all_layers),
        past_shown_per_query=float(np.mean(shown)),
        search_threads=vector_search_threads,
        numpy_floor_threaded=Latency.of(floor_threaded),
        recall_at_20=float(np.mean(recall)),
        vector_bytes=vector_bytes,
        scanned_bytes_per_query=scanned,
        bandwidth=bandwidth,
        bandwidth_floor_ms=bandwidth.floor_ms(scanned),
        save_ms=save * 1000,
        reload_first_search_ms=reload * 1000,
    )


def _unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    normalised: npt.NDArray[np.float32] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return normalised


def _numpy_top_k(vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    scores = vectors @ query
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def _threaded_top_k(
    pool: ThreadPoolExecutor, threads: int, vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int
) -> npt.NDArray[np.intp]:
    """The same top-k, each thread taking the product of an equal share of the rows (one thread
    below `SPLIT_MIN_ROWS` per thread, as the search does)."""
    threads = max(1, min(threads, len(vectors) // SPLIT_MIN_ROWS))
    if threads == 1:
        return _numpy_top_k(vectors, query, k)
    bounds = np.linspace(0, len(vectors), threads + 1).astype(int)
    parts = pool.map(lambda a, b: vectors[a:b] @ query, bounds[:-1], bounds[1:])
    scores = np.concatenate(list(parts))
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]
