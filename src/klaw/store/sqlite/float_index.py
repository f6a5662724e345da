"""Where each rowid's record is in the float file beside klaw.db (`vector_floats.py`, decision 534)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy once the file has records: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt


class RecordIndex:
    """Where each rowid's record is: a sorted array of rowids and their record numbers, plus the
    changes since it was sorted (a dict, folded in every `FOLD_AT` changes). 16 bytes a record where a
    dict of every rowid took ~100 (100 MB at 1M vectors). Changed on the database thread, looked up
    on any: a lookup that meets a fold half done finds a record or none, and a wrong or missing one
    only sends that row to the table (`FloatFile.read` checks every record it reads)."""

    FOLD_AT = 4096

    def __init__(self, rowids: Sequence[int] = ()) -> None:
        self._sorted: tuple[npt.NDArray[np.int64], ...] | None = None  # None: no numpy needed yet
        if rowids:
            import numpy as np

            listed = np.asarray(rowids, dtype=np.int64)
            numbers = np.flatnonzero(listed > 0)
            self._sorted = self._sort(listed[numbers], numbers)
        self._recent: dict[int, int] = {}  # rowid -> record number, -1 for erased

    @staticmethod
    def _sort(rowids: npt.NDArray[np.int64], numbers: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
        import numpy as np

        # Later records win over earlier ones of the same rowid (a rowid used again after a forget).
        order = np.lexsort((-numbers, rowids))
        rowids, numbers = rowids[order], numbers[order]
        first = np.ones(len(rowids), dtype=bool)
        first[1:] = rowids[1:] != rowids[:-1]
        return rowids[first], numbers[first]

    def get(self, rowid: int) -> int | None:
        number = self._recent.get(rowid)
        if number is not None:
            return number if number >= 0 else None
        if self._sorted is None:
            return None
        import numpy as np

        rowids, numbers = self._sorted
        at = int(np.searchsorted(rowids, rowid))
        return int(numbers[at]) if at < len(rowids) and rowids[at] == rowid else None

    def find(self, rowids: Sequence[int]) -> list[int | None]:
        """`get` of each of `rowids`, the sorted part searched once for all of them."""
        import numpy as np

        recent, found = self._recent, [self._recent.get(rowid) for rowid in rowids]
        if self._sorted is not None and len(self._sorted[0]):
            listed, numbers = self._sorted
            wanted = np.asarray(rowids, dtype=np.int64)
            at = np.minimum(np.searchsorted(listed, wanted), len(listed) - 1)
            hit = (listed[at] == wanted).tolist()
            placed = numbers[at].tolist()
            found = [
                f if rowid in recent else (placed[i] if hit[i] else None)
                for i, (rowid, f) in enumerate(zip(rowids, found, strict=True))
            ]
        return [None if f is None or f < 0 else f for f in found]

    def put(self, rowid: int, number: int) -> None:
        self._recent[rowid] = number
        if len(self._recent) >= self.FOLD_AT:
            self._fold()

    def drop(self, rowid: int) -> None:
        self.put(rowid, -1)

    def _fold(self) -> None:
        import numpy as np

        recent = dict(self._recent)
        empty = np.zeros(0, dtype=np.int64)
        rowids, numbers = self._sorted or (empty, empty)
        kept = ~np.isin(rowids, np.fromiter(recent, dtype=np.int64, count=len(recent)))
        added = [(r, n) for r, n in recent.items() if n >= 0]
        self._sorted = self._sort(
            np.concatenate([rowids[kept], np.array([r for r, _ in added], dtype=np.int64)]),
            np.concatenate([numbers[kept], np.array([n for _, n in added], dtype=np.int64)]),
        )
        self._recent = {}
