"""A large search split over threads gives the whole search's answer; a view taken before later
writes keeps seeing exactly its rows (that is what lets a product run off the database thread)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from klaw.store.shared.vector_matrix import SPLIT_MIN_ROWS, ChatMatrix, MatrixView, VectorScope, merge_nearest
from klaw.store.shared.vector_quant import quantize

DIM = 4


def unit_rows(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def view_of(vectors: npt.NDArray[np.float32], segments: npt.NDArray[np.int64]) -> MatrixView:
    n = len(vectors)
    codes, scales = quantize(vectors)
    return MatrixView(codes, scales, np.arange(1, n + 1, dtype=np.int64), segments, np.arange(n, dtype=np.int64) * 1000)


def test_a_split_search_equals_the_whole_search() -> None:
    rng = np.random.default_rng(7)
    n = 2 * SPLIT_MIN_ROWS + 123
    segments = np.where(np.arange(n) < n // 3, 1, 2).astype(np.int64)
    view = view_of(unit_rows(rng, n), segments)
    parts = view.split(3)
    assert len(parts) == 2  # no part smaller than SPLIT_MIN_ROWS
    assert sum(len(part) for part in parts) == n
    for query in unit_rows(rng, 5):
        for scope in (VectorScope(), VectorScope(segment_id=1), VectorScope(since_ms=5_000_000, until_ms=30_000_000)):
            whole = view.nearest(query, 25, scope)
            split = merge_nearest([part.nearest(query, 25, scope) for part in parts], 25)
            assert [rowid for rowid, _ in split] == [rowid for rowid, _ in whole]
            assert len(whole) == 25


def test_small_views_and_one_thread_are_not_split() -> None:
    rng = np.random.default_rng(8)
    small = view_of(unit_rows(rng, SPLIT_MIN_ROWS + 1), np.ones(SPLIT_MIN_ROWS + 1, dtype=np.int64))
    assert small.split(4) == [small]
    large = view_of(unit_rows(rng, 3 * SPLIT_MIN_ROWS), np.ones(3 * SPLIT_MIN_ROWS, dtype=np.int64))
    assert large.split(1) == [large]


def test_a_view_is_untouched_by_appends_and_growth() -> None:
    rng = np.random.default_rng(9)
    matrix = ChatMatrix.empty(8, DIM)
    first = unit_rows(rng, 5)
    matrix.append([(i + 1, 1, i, first[i]) for i in range(5)])
    view = matrix.view()
    query = first[2]
    before = view.nearest(query, 3, VectorScope())
    later = unit_rows(rng, 300)
    later[0] = query  # a new row equal to the query: the view must not see it
    matrix.append([(100 + i, 1, 100 + i, later[i]) for i in range(2)])  # fits the capacity
    matrix.append([(200 + i, 1, 200 + i, later[i]) for i in range(2, 300)])  # grows into new arrays
    assert len(view) == 5
    assert np.array_equal(view.codes, quantize(first)[0])
    assert view.nearest(query, 3, VectorScope()) == before
    assert before[0][0] == 3
    assert matrix.view().nearest(query, 1, VectorScope())[0][0] in (3, 100)
