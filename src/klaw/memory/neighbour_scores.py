"""A found message lends part of its score to the messages said just before and after it.

In a conversation the words that match a question and the answer to it are often in different
messages: "how did the interview go?" / "great, they offered me the job". A search that scores
messages one by one finds the first and misses the second. So after fusion each candidate passes
`weight × its score` to the conversation messages next to it in its segment, and half as much
again per further step (`span` messages each way). Messages not found by either side can enter the
ranking this way; a message found on its own and also next to another hit adds both.

On LoCoMo dev this took hybrid search from R@5 58.1 / R@10 67.4 to 64.1 / 74.0 (weight 0.4, span 2;
both halves of the split gained; docs/memory/how-memory-works.md). It is done on the candidates
only: the neighbours' own scores are not computed, so the cost is one indexed lookup per candidate.

A candidate that asks something (`asks`: its text holds a question mark) lends its whole score to
the message right after it, the reply: a question's words match the question, and what was asked
for is in the answer ("what does the drawing mean to you?" / "it stands for freedom"). The reply
then ranks level with the question instead of 0.4 below it (LoCoMo dev R@5 66.0 → 67.1, R@10
75.0 → 75.9; docs/decisions/166-a-question-lends-to-its-answer.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

DECAY_PER_STEP = 0.5  # a message two steps away gets half of what the adjacent one gets
ANSWER_WEIGHT = 1.0  # what a question lends the message right after it: the answer weighs as much


@dataclass(frozen=True, slots=True)
class Spread:
    """A rowid's score after spreading: its own fused score plus what its neighbours lent it.
    `lender` is the candidate that lent it the most (None when nothing was lent)."""

    score: float
    own: float
    lender: int | None


def step_weight(weight: float, distance: int) -> float:
    """What a candidate lends a message `distance` (≥ 1) conversation messages away, per unit of score."""
    return weight * DECAY_PER_STEP ** (distance - 1)


def spread_to_neighbours(
    scores: Mapping[int, float],
    neighbours: Mapping[int, Sequence[tuple[int, int]]],
    weight: float,
    *,
    excluded: frozenset[int] = frozenset(),
    asks: Collection[int] = frozenset(),
) -> dict[int, Spread]:
    """Every candidate of `scores` and every neighbour it lends to, with its spread score.

    `neighbours[rowid]` lists `(neighbour rowid, distance)` for a candidate. Excluded rowids (what the
    context already shows) neither receive nor enter; candidates passed in are assumed not excluded.
    A candidate in `asks` lends `ANSWER_WEIGHT` of its score to the neighbour just after it (a
    larger rowid at distance 1) when neighbours are lent to at all (`weight` > 0).
    """
    if weight < 0:
        raise ValueError("weight must be >= 0")
    lent: dict[int, float] = {}
    best_lender: dict[int, tuple[float, int]] = {}
    if weight > 0:
        for rowid, score in scores.items():
            for neighbour, distance in neighbours.get(rowid, ()):
                if neighbour in excluded or distance < 1:
                    continue
                answer = rowid in asks and distance == 1 and neighbour > rowid
                amount = (ANSWER_WEIGHT if answer else step_weight(weight, distance)) * score
                lent[neighbour] = lent.get(neighbour, 0.0) + amount
                previous = best_lender.get(neighbour)
                if previous is None or (amount, -rowid) > (previous[0], -previous[1]):
                    best_lender[neighbour] = (amount, rowid)
    spread: dict[int, Spread] = {}
    for rowid in scores.keys() | lent.keys():
        own = scores.get(rowid, 0.0)
        lender = best_lender.get(rowid)
        spread[rowid] = Spread(own + lent.get(rowid, 0.0), own, None if lender is None else lender[1])
    return spread
