"""Reciprocal rank fusion: several best-first rankings of message rowids merged into one.

Vector distances and bm25 ranks live on different scales that cannot be added; RRF uses only each
item's position, so a message near the top of both lists beats one that tops a single list. Each
appearance at 0-based position `rank` adds `1 / (k + rank + 1)`; k = 60 (the value of the original
paper and of both klaw designs) keeps the first few positions from dominating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RRF_K = 60


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
