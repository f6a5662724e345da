"""The best `k` of a chat's int8 scores, exactly, without partitioning every score (decision 242).

A segment-scoped search of a 1M-message chat scores 1M rows, then keeps the best ~60. Partitioning all
1M float64 scores (`np.argpartition`, after masking the rows out of scope to -inf and negating a copy)
cost a third of the search's CPU, as much as a third of the SIMD scan itself. Instead:

1. a threshold from a sample: every `SAMPLE_STEP`-th score in scope, and its k-th best. Those k
   sampled rows are in scope and score at least the threshold, so at least k rows do;
2. one comparison pass keeps the rows in scope scoring at least the threshold (about `k × SAMPLE_STEP`
   of them, whatever the chat's size);
3. those few are ranked.

The answer is exactly the first `k` of every in-scope row sorted by score, best first, ties by row
order (which the old partition left to chance): the threshold only decides which rows are looked at,
and every row that can be among the best `k` is at or above it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# One score in this many makes the sample; the rows kept for ranking are about `k` times this.
SAMPLE_STEP = 64


def best_rows(scores: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_] | None, k: int) -> npt.NDArray[np.intp]:
    """Indices of the `k` highest `scores` among the rows `mask` keeps (all when None), best first,
    ties by index; fewer when fewer rows are in scope."""
    if k <= 0 or len(scores) == 0:
        return np.zeros(0, dtype=np.intp)
    candidates = _above_sampled_threshold(scores, mask, k)
    if candidates is None:
        candidates = np.arange(len(scores)) if mask is None else np.flatnonzero(mask)
    return _ranked(scores, candidates, k)


def _above_sampled_threshold(
    scores: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_] | None, k: int
) -> npt.NDArray[np.intp] | None:
    """The rows in scope scoring at least the k-th best of a sample of them (at least `k` rows), or
    None when the sample holds fewer than `k` rows in scope (then every row in scope is a candidate)."""
    sample = scores[::SAMPLE_STEP]
    if mask is not None:
        sample = sample[mask[::SAMPLE_STEP]]
    if len(sample) < k or len(sample) * 2 >= len(scores):  # too few to cut anything: rank them all
        return None
    threshold = np.partition(sample, len(sample) - k)[len(sample) - k]
    kept = scores >= threshold
    if mask is not None:
        kept &= mask
    return np.flatnonzero(kept)


def _ranked(scores: npt.NDArray[np.float64], candidates: npt.NDArray[np.intp], k: int) -> npt.NDArray[np.intp]:
    """The best `k` of `candidates` (ascending indices), best first, ties by index."""
    values = scores[candidates]
    if k < len(candidates):
        kth = np.partition(values, len(values) - k)[len(values) - k]
        above = values > kth
        tied = np.flatnonzero(values == kth)[: k - int(np.count_nonzero(above))]
        keep = np.flatnonzero(above)
        picked = np.sort(np.concatenate([keep, tied]))
        candidates, values = candidates[picked], values[picked]
    order = np.lexsort((candidates, -values))
    return candidates[order]
