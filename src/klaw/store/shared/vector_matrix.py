"""One chat's message vectors in memory as int8 rows (`vector_quant.py`), and the views searched.

Backend-neutral: SQLite and PostgreSQL keep the same copies (`vector_lru.py`). A matrix is changed
under its cache's lock but searched on other threads: `view` hands out a `MatrixView` (numpy views
of the rows present at that moment), and rows a view covers are never written again (appends go
past them; growing copies into new arrays; a delete drops the whole matrix). A view taken before a
delete may still name a deleted rowid: the exact rescore reads the rowid's vector from the
database, finds none, and drops it.

A small chat (at most `EXACT_ROWS_MAX` rows) keeps its float32 rows too, and its shortlist is rescored
from them (`MatrixView.exact_nearest`) instead of from the database: on a chat of a few thousand
messages that read was a third of the vector side's CPU (decision 350), for 1,536 bytes a row more,
counted in the cache's budget. A view taken before a delete may then rescore a deleted row from
memory; the search's read of the hits' rows drops a row whose message is gone, as before.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from klaw.store.shared.vector_quant import quantize, scores
from klaw.store.shared.vector_top import best_rows

G = TypeVar("G", bound=np.generic)

MIN_CAPACITY = 256
# Growing adds a quarter: a copy per ~25 % of growth, and at most a quarter of a chat's matrix allocated ahead.
GROWTH_DIVISOR = 4
# A view at least this large is searched in parts on several threads (`MatrixView.split`): the
# scan is memory-bound, and two threads read a large chat faster than one; below it a scan takes
# well under a millisecond and a thread hop would cost more than it saves.
SPLIT_MIN_ROWS = 20_000
# Below this share of a chat's rows, gathering the scoped rows beats a full scan plus a mask.
GATHER_FRACTION = 0.25
# Bytes a row costs besides its codes: scale (float32), rowid, segment, created (int64 each).
ROW_OVERHEAD_BYTES = 4 + 3 * 8
# Rows quantized at a time while loading, so a large chat never exists in memory as float32.
LOAD_BLOCK = 8192
# A chat of at most this many rows keeps its float32 rows for the rescore (15 MB at 384 dims);
# a larger one drops them when it grows past it and is rescored from the database.
EXACT_ROWS_MAX = 10_000


@dataclass(frozen=True)
class VectorScope:
    segment_id: int | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    before_segment_id: int | None = None  # the chat's segments before this one (its past conversations)
    # Rowids the caller leaves out (what the context already shows): they take no shortlist place,
    # so the exact rescore reads only rows that can be answered (decision 231).
    exclude: frozenset[int] = frozenset()


@dataclass(frozen=True)
class MatrixView:
    """The rows of a chat's matrix at one moment; safe to search on any thread (see module doc)."""

    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    rowids: npt.NDArray[np.int64]
    segments: npt.NDArray[np.int64]
    created: npt.NDArray[np.int64]
    floats: npt.NDArray[np.float32] | None = None  # the exact rows, for a small chat (module doc)

    def __len__(self) -> int:
        return len(self.rowids)

    @property
    def bytes_per_row(self) -> int:
        """What a full scan reads per row: its codes and its scale."""
        return int(self.codes.shape[1]) + 4 if self.codes.ndim == 2 else 4

    def split(self, parts: int) -> list[MatrixView]:
        """Contiguous parts of about equal size (one part when the view is small), each searched on
        its own thread; `merge_nearest` combines their answers into the whole view's."""
        count = min(parts, len(self) // SPLIT_MIN_ROWS) if parts > 1 else 1
        if count <= 1:
            return [self]
        bounds = np.linspace(0, len(self), count + 1).astype(int)
        return [
            MatrixView(
                self.codes[a:b],
                self.scales[a:b],
                self.rowids[a:b],
                self.segments[a:b],
                self.created[a:b],
                None if self.floats is None else self.floats[a:b],
            )
            for a, b in itertools.pairwise(bounds)
        ]

    def nearest(self, query: npt.NDArray[np.float32], count: int, scope: VectorScope) -> list[tuple[int, float]]:
        """The `count` nearest (rowid, approximate cosine distance) within `scope`, closest first, ties
        by row order (`vector_top.py`)."""
        top, top_scores = self._shortlist(query, count, scope)
        ranked = zip(self.rowids[top].tolist(), (1.0 - top_scores).tolist(), strict=True)
        return [pair for pair in ranked if pair[0] not in scope.exclude][:count]

    def exact_nearest(
        self, query: npt.NDArray[np.float32], count: int, scope: VectorScope, limit: int
    ) -> list[tuple[int, float]] | None:
        """`nearest`'s `count` rows rescored with the float rows kept in memory: the `limit` closest
        (rowid, exact cosine distance), ties by rowid, as `vector_quant.exact_distances` ranks them
        from the database's blobs (the same float32 rows and the same product). None when this view
        keeps no float rows."""
        if self.floats is None:
            return None
        top, _ = self._shortlist(query, count, scope)
        rowids = self.rowids[top].tolist()
        kept = [i for i, rowid in enumerate(rowids) if rowid not in scope.exclude][:count]
        if not kept:
            return []
        rows = self.floats[top[kept]]  # a contiguous copy, as the joined blobs are
        distances = 1.0 - rows @ np.asarray(query, dtype=np.float32)
        ranked = sorted(zip((rowids[i] for i in kept), distances.tolist(), strict=True), key=lambda p: (p[1], p[0]))
        return ranked[:limit]

    def _shortlist(
        self, query: npt.NDArray[np.float32], count: int, scope: VectorScope
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """The rows (indices into the view) of the best `count + len(exclude)` int8 scores within
        `scope`, best first, and those scores."""
        none = (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64))
        n = len(self.rowids)
        if n == 0 or count <= 0:
            return none
        mask = self._in_scope(scope)
        selected = n if mask is None else int(np.count_nonzero(mask))
        if selected == 0:
            return none
        # The best `count` outside `exclude` are among the best `count + len(exclude)` of the scope:
        # leaving them out after ranking equals masking them, without a pass over every row.
        k = min(count + len(scope.exclude), selected)
        if mask is not None and selected < n * GATHER_FRACTION:
            rows = np.flatnonzero(mask)
            similarities = scores(self.codes[rows], self.scales[rows], query)
            best = best_rows(similarities, None, k)
            top, top_scores = rows[best], similarities[best]
        else:
            similarities = scores(self.codes, self.scales, query)
            top = best_rows(similarities, mask, k)
            top_scores = similarities[top]
        return top, top_scores

    def _in_scope(self, scope: VectorScope) -> npt.NDArray[np.bool_] | None:
        """The rows `scope` keeps, or None when it keeps every row (no pass over the columns)."""
        tests: list[npt.NDArray[np.bool_]] = []
        if scope.segment_id is not None:
            tests.append(self.segments == scope.segment_id)
        if scope.before_segment_id is not None:
            tests.append(self.segments < scope.before_segment_id)
        if scope.since_ms is not None:
            tests.append(self.created >= scope.since_ms)
        if scope.until_ms is not None:
            tests.append(self.created < scope.until_ms)
        if not tests:
            return None
        mask = tests[0]
        for test in tests[1:]:
            mask &= test
        return mask


def merge_nearest(answers: list[list[tuple[int, float]]], count: int) -> list[tuple[int, float]]:
    """The `count` closest of several parts' answers (each the part's own closest): exactly the
    whole view's answer, since a row among the whole's closest is among its part's closest."""
    if len(answers) == 1:
        return answers[0][:count]
    return sorted((pair for answer in answers for pair in answer), key=lambda pair: (pair[1], pair[0]))[:count]


@dataclass
class ChatMatrix:
    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    rowids: npt.NDArray[np.int64]
    segments: npt.NDArray[np.int64]
    created: npt.NDArray[np.int64]
    size: int
    version: int = 0  # the chat's `vector_marks` version these rows reflect
    saved_version: int | None = None  # the version of the copy saved beside the database, if any
    floats: npt.NDArray[np.float32] | None = None  # the exact rows, while the chat is small (module doc)

    @classmethod
    def empty(cls, capacity: int, dim: int, version: int = 0, *, exact: bool = False) -> ChatMatrix:
        """`exact`: keep the float32 rows too, if `capacity` is within `EXACT_ROWS_MAX`."""
        capacity = max(capacity, 1)
        return cls(
            codes=np.zeros((capacity, dim), dtype=np.int8),
            scales=np.zeros(capacity, dtype=np.float32),
            rowids=np.zeros(capacity, dtype=np.int64),
            segments=np.zeros(capacity, dtype=np.int64),
            created=np.zeros(capacity, dtype=np.int64),
            size=0,
            version=version,
            floats=np.zeros((capacity, dim), dtype=np.float32) if exact and capacity <= EXACT_ROWS_MAX else None,
        )

    @classmethod
    def for_load(cls, rows: int, dim: int, version: int = 0) -> ChatMatrix:
        """An empty matrix for a chat of `rows` vectors being loaded (float rows kept when `rows` is within
        `EXACT_ROWS_MAX`), with a quarter more room than them, as `_grow` leaves: the first message after
        the load is stored past the loaded rows instead of copying all of them into new arrays (decision
        498: ~0.1–0.2 s of the database thread at 100k, under the cache's lock). The room costs no memory
        until used (zeroed pages are given on first write) and is not counted (`nbytes`)."""
        matrix = cls.empty(rows + rows // GROWTH_DIVISOR, dim, version)
        if rows <= EXACT_ROWS_MAX:
            matrix.floats = np.zeros((len(matrix.rowids), dim), dtype=np.float32)
        return matrix

    @classmethod
    def from_arrays(cls, arrays: dict[str, npt.NDArray[np.generic]], version: int) -> ChatMatrix:
        """A matrix from saved arrays (`arrays()`), full to capacity: an append grows it."""
        return cls(
            codes=np.ascontiguousarray(arrays["codes"], dtype=np.int8),
            scales=np.asarray(arrays["scales"], dtype=np.float32),
            rowids=np.asarray(arrays["rowids"], dtype=np.int64),
            segments=np.asarray(arrays["segments"], dtype=np.int64),
            created=np.asarray(arrays["created"], dtype=np.int64),
            size=len(arrays["rowids"]),
            version=version,
            saved_version=version,
        )

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[object]], dim: int, version: int) -> ChatMatrix:
        """A matrix from (rowid, segment_id, created_at, float32 blob) rows, quantized a block at a
        time (a small chat's float rows kept too)."""
        matrix = cls.for_load(len(rows), dim, version)
        for first in range(0, len(rows), LOAD_BLOCK):
            block = rows[first : first + LOAD_BLOCK]
            vectors = np.frombuffer(b"".join(row[3] for row in block), dtype=np.float32).reshape(len(block), dim)  # type: ignore[misc]
            matrix.append_quantized(((r[0], r[1], r[2]) for r in block), *quantize(vectors), floats=vectors)  # type: ignore[misc]
        return matrix

    @property
    def dim(self) -> int:
        return int(self.codes.shape[1])

    @property
    def nbytes(self) -> int:
        """Memory the rows in use take. Capacity beyond them is zeroed on allocation and untouched
        until appended to, so the system has not given it pages yet: counting it would let the
        first append after a load (which grows the arrays) push a chat that fits out of the cache."""
        floats = 0 if self.floats is None else self.size * self.dim * 4
        return self.size * row_bytes(self.dim) + floats

    def drop_floats(self) -> None:
        """Keep the int8 rows only (the rescore then reads the database's)."""
        self.floats = None

    def arrays(self) -> dict[str, npt.NDArray[np.generic]]:
        n = self.size
        return {
            "codes": self.codes[:n],
            "scales": self.scales[:n],
            "rowids": self.rowids[:n],
            "segments": self.segments[:n],
            "created": self.created[:n],
        }

    def append(self, rows: Sequence[tuple[int, int, int, npt.NDArray[np.float32]]]) -> None:
        """Add (rowid, segment_id, created_at, float32 vector) rows after the present ones."""
        if rows:
            vectors = np.stack([np.asarray(row[3], dtype=np.float32) for row in rows])
            codes, scales = quantize(vectors)
            self.append_quantized(((r[0], r[1], r[2]) for r in rows), codes, scales, floats=vectors)

    def append_quantized(
        self,
        meta: Iterable[tuple[int, int, int]],
        codes: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
        floats: npt.NDArray[np.float32] | None = None,
    ) -> None:
        """Rows after the present ones; `floats`, their float32 rows, are kept while the matrix keeps
        them (without them, or past `EXACT_ROWS_MAX`, it stops keeping any)."""
        first, needed = self.size, self.size + len(codes)
        if self.floats is not None and (floats is None or needed > EXACT_ROWS_MAX):
            self.floats = None
        if needed > len(self.rowids):
            self._grow(max(needed, len(self.rowids) + len(self.rowids) // GROWTH_DIVISOR, MIN_CAPACITY))
        if self.floats is not None:
            self.floats[first:needed] = floats
        self.codes[first:needed] = codes
        self.scales[first:needed] = scales
        columns = np.array(list(meta), dtype=np.int64).reshape(len(codes), 3)
        self.rowids[first:needed] = columns[:, 0]
        self.segments[first:needed] = columns[:, 1]
        self.created[first:needed] = columns[:, 2]
        self.size = needed

    def _grow(self, capacity: int) -> None:
        codes = np.zeros((capacity, self.codes.shape[1]), dtype=np.int8)
        codes[: self.size] = self.codes[: self.size]
        self.codes = codes
        if self.floats is not None:
            floats = np.zeros((capacity, self.floats.shape[1]), dtype=np.float32)
            floats[: self.size] = self.floats[: self.size]
            self.floats = floats
        self.scales = _resized(self.scales, capacity, self.size)
        self.rowids = _resized(self.rowids, capacity, self.size)
        self.segments = _resized(self.segments, capacity, self.size)
        self.created = _resized(self.created, capacity, self.size)

    def view(self) -> MatrixView:
        n = self.size
        floats = None if self.floats is None else self.floats[:n]
        return MatrixView(self.codes[:n], self.scales[:n], self.rowids[:n], self.segments[:n], self.created[:n], floats)


def row_bytes(dim: int) -> int:
    """Memory one cached vector of `dim` takes (codes and the row's other columns)."""
    return dim + ROW_OVERHEAD_BYTES


def _resized(array: npt.NDArray[G], capacity: int, size: int) -> npt.NDArray[G]:
    grown: npt.NDArray[G] = np.zeros(capacity, dtype=array.dtype)
    grown[:size] = array[:size]
    return grown
