"""Which messages a search weighs, and which neighbours' messages it reads to weigh them.

Weighing (`message_weight.weighed`: what a message asks, how few its words) reads a message's text and
only ever lowers a score, so a message whose spread score (`neighbour_scores`) is below the `limit`-th
best final score found cannot enter the best `limit`: hybrid search weighs from the highest spread
score down and stops there (`best_weighed`, decision 351). The same bound, taken from the candidates
alone before any neighbour's text is read, says which neighbours can be reached at all (`least_final`,
`worth_reading`): a search's ~90 neighbours were all read and turned into messages, ~10 of them weighed
(decision 470). Same hits and scores as weighing everything.
"""

from __future__ import annotations

import heapq

from klaw.memory.message_weight import ASK_MARKS, weighed
from klaw.memory.neighbour_scores import Spread
from klaw.store.records import StoredMessage


def weighed_one(spread: dict[int, Spread], messages: dict[int, StoredMessage], replied: set[int], rowid: int) -> float:
    return weighed(spread[rowid].score, spread[rowid].own, messages[rowid].content, replied=rowid in replied)


def may_ask(message: StoredMessage) -> bool:
    """Whether `asking_share` of the text can be above 0 (a sentence of it ends with a question mark)."""
    return any(mark in message.content for mark in ASK_MARKS)


def best_weighed(
    spread: dict[int, Spread],
    messages: dict[int, StoredMessage],
    replied: set[int],
    limit: int,
    known: dict[int, float] | None = None,
) -> dict[int, float]:
    """The final score of every message that can be among the best `limit`: a message's final score
    is at most its spread score (`weighed` only takes off and scales by less than 1, when no score is
    negative), so messages are weighed from the highest spread score down until the next one's is
    below the `limit`-th best final score found: none after it could enter (decision 351). Weighing
    reads each text's words; most of a search's ~200 candidates and neighbours never get near the
    best 20. `known`: final scores already weighed, by rowid."""
    known = known or {}
    present = [rowid for rowid in spread if rowid in messages]
    if any(spread[rowid].score < 0 or spread[rowid].own < 0 for rowid in present):
        return {rowid: weighed_one(spread, messages, replied, rowid) for rowid in present}
    present.sort(key=lambda rowid: spread[rowid].score, reverse=True)
    final: dict[int, float] = {}
    best: list[float] = []  # the `limit` highest final scores so far (a min-heap)
    for rowid in present:
        bound = spread[rowid].score
        if len(best) == limit and bound < best[0]:
            break
        score = final[rowid] = known[rowid] if rowid in known else weighed_one(spread, messages, replied, rowid)
        if len(best) < limit:
            heapq.heappush(best, score)
        elif score > best[0]:
            heapq.heapreplace(best, score)
    return final


def least_final(
    spread: dict[int, Spread], candidates: dict[int, StoredMessage], limit: int
) -> tuple[float | None, dict[int, float]]:
    """The `limit`-th highest of the candidates' lowest possible final scores, below which no message
    is weighed (`worth_reading`), and those scores by rowid; (None, {}) when there is no such bound
    (fewer candidates than `limit`, or a negative score, where `best_weighed` weighs everything).
    Weighing as a question that was answered takes the most off, so `weighed(…, replied=True)` is at
    most a candidate's final score (and is that score when the candidate was answered or asks nothing)."""
    if len(candidates) < limit or limit <= 0 or any(s.score < 0 or s.own < 0 for s in spread.values()):
        return None, {}
    # As `best_weighed`: highest spread first, until one's spread (more than its weighing) is below the
    # `limit`-th best weighing found.
    lowest: dict[int, float] = {}
    best: list[float] = []  # a min-heap of the `limit` highest
    for rowid in sorted(candidates, key=lambda rowid: spread[rowid].score, reverse=True):
        share = spread[rowid]
        if len(best) == limit and share.score < best[0]:
            break
        low = lowest[rowid] = weighed(share.score, share.own, candidates[rowid].content, replied=True)
        if len(best) < limit:
            heapq.heappush(best, low)
        elif low > best[0]:
            heapq.heapreplace(best, low)
    return best[0], lowest


def worth_reading(
    spread: dict[int, Spread], around: dict[int, list[tuple[int, int]]], asks: set[int], least: float
) -> set[int]:
    """The rowids whose messages ranking reads: those whose spread score reaches `least` (`least_final`),
    and the message right after each candidate asking (whether it is there decides how that question is
    weighed). The others are never weighed: `limit` candidates have final scores of at least `least`, each
    spread at least as high, so `best_weighed` has weighed them, and stopped, before it reaches a
    message spread lower (decision 470). On bench turn's chat ~10 of the ~90 neighbours a search found."""
    worth = {rowid for rowid, share in spread.items() if share.score >= least}
    worth.update(n for rowid in asks for n, d in around.get(rowid, ()) if d == 1 and n > rowid)
    return worth
