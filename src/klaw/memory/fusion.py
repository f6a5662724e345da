"""Merging the rankings of several search sides into one.

Two ways, for two kinds of input:

- `reciprocal_rank_fusion` uses only each item's position, so sides on any scale (or none) can be
  merged: each appearance at 0-based position `rank` adds `1 / (k + rank + 1)`; k = 60 (the value of
  the original paper and of both klaw designs) keeps the first few positions from dominating. It
  treats both sides as equally good, and throws away how much better the first hit is than the
  second. Archival memory merges memories with messages this way.
- `score_fusion` keeps the scores: each side's scores are min-max normalised over its own candidates
  (best 1, worst `MIN_SHARE`, not 0: with two candidates plain min-max would score the second as if
  that side had not found it at all) and mixed by a weight. Message search uses it: with the local MiniLM embedder
  the vector side is clearly weaker than full text on conversation (LoCoMo dev: R@5 41 vs 53), and
  equal-weight RRF let it pull good full-text hits down (hybrid R@5 51, below full text alone);
  weighting full text 0.6 and keeping the score gaps gave 58 (see docs/memory/how-memory-works.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RRF_K = 60
MIN_SHARE = 0.1  # what the worst candidate of a side still gets, as a fraction of the best


@dataclass(frozen=True, slots=True)
class FusedItem:
    rowid: int
    score: float


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], *, k: int = RRF_K) -> list[FusedItem]:
    """All rowids of `rankings`, best first, each once (a rowid repeated inside one ranking counts
    at its first position only).

    Ties are broken deterministically: the better best position in any ranking first, then the
    earlier ranking (callers pass the vector ranking first), then the smaller rowid.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    scores: dict[int, float] = {}
    first_seen: dict[int, tuple[int, int]] = {}  # rowid -> (best position, ranking index)
    for ranking_index, ranking in enumerate(rankings):
        seen_here: set[int] = set()
        for rank, rowid in enumerate(ranking):
            if rowid in seen_here:
                continue
            seen_here.add(rowid)
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank + 1)
            best = first_seen.get(rowid)
            if best is None or rank < best[0]:
                first_seen[rowid] = (rank, ranking_index)
    order = sorted(scores, key=lambda rowid: (-scores[rowid], *first_seen[rowid], rowid))
    return [FusedItem(rowid, scores[rowid]) for rowid in order]


def min_max(scores: Mapping[int, float], floor: float = MIN_SHARE) -> dict[int, float]:
    """Scores (higher is better) rescaled linearly onto [floor, 1] over the candidates given: the best
    1, the worst `floor`; all equal (or a single candidate) 1."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    return {rowid: floor + (1.0 - floor) * (value - low) / (high - low) for rowid, value in scores.items()}


def score_fusion(sides: Sequence[tuple[Mapping[int, float], float]]) -> dict[int, float]:
    """rowid → Σ weight × `min_max` score, over `(scores, weight)` sides (scores: higher is better).
    A rowid missing from a side gets nothing from it: less than that side's worst candidate."""
    fused: dict[int, float] = {}
    for scores, weight in sides:
        if weight < 0:
            raise ValueError("weights must be >= 0")
        for rowid, value in min_max(scores).items():
            fused[rowid] = fused.get(rowid, 0.0) + weight * value
    return fused
