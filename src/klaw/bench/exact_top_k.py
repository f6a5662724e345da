"""The benches' exact float reference: unit rows, and the top k of their dot products with a query by
numpy, in one thread or split over several as the product's search splits its scan.

`klaw bench scale` and `klaw bench vector` compare a search with it twice: as the truth its recall@k is
counted against, and as the floor its time is set beside (plain numpy over the same float32 rows).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from klaw.store.shared.vector_matrix import SPLIT_MIN_ROWS


def unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    normalised: npt.NDArray[np.float32] = (matrix / norms).astype(np.float32, copy=False)
    return normalised


def numpy_top_k(vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    scores = vectors @ query
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def threaded_top_k(
    pool: ThreadPoolExecutor, threads: int, vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int
) -> npt.NDArray[np.intp]:
    """The same top-k, each thread taking the product of an equal share of the rows (one thread
    below `SPLIT_MIN_ROWS` per thread, as the search does)."""
    threads = max(1, min(threads, len(vectors) // SPLIT_MIN_ROWS))
    if threads == 1:
        return numpy_top_k(vectors, query, k)
    bounds = np.linspace(0, len(vectors), threads + 1).astype(int)
    parts = pool.map(lambda a, b: vectors[a:b] @ query, bounds[:-1], bounds[1:])
    scores = np.concatenate(list(parts))
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]
