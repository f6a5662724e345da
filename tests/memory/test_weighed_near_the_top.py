"""Hybrid search weighs (reads the words of) only the messages that can reach its best `limit`: a
message's final score is at most its spread score, so weighing stops at the first whose spread score
is below the `limit`-th best final score found (decision 351), and a neighbour spread below the
`limit`-th best final score the candidates alone can have is not even read (decision 470). Same hits,
same scores, same order as reading and weighing every candidate and neighbour, which the search did before."""

from __future__ import annotations

import random
from typing import Any

import pytest

import klaw.memory.hybrid_search as hybrid
import klaw.memory.weighing as weighing
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.neighbour_scores import Spread
from klaw.store.records import Role, StoredMessage
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation

WORDS = ["garden", "water", "tomato", "seed", "sun", "rain", "hose", "soil", "basil", "fence", "shed", "spade"]


def weigh_all(
    spread: dict[int, Spread],
    messages: dict[int, StoredMessage],
    replied: set[int],
    limit: int,
    known: dict[int, float] | None = None,
) -> dict[int, float]:
    """Every message weighed, as the search did before."""
    return {rowid: weighing.weighed_one(spread, messages, replied, rowid) for rowid in spread if rowid in messages}


async def test_only_messages_near_the_top_are_weighed_and_the_answer_is_the_same(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    chat = await Conversation(store).bind()
    for i in range(240):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14)))
        text = f"{words}?" if i % 5 == 0 else ("Sure!" if i % 7 == 0 else words)
        await chat.say(text, Role.USER if i % 2 == 0 else Role.ASSISTANT)
    search = HybridSearch(store, chat.embedder)
    weighed_texts = 0
    real = weighing.weighed_one
    read = [0, 0]  # neighbours' messages read: with the bound, without it
    neighbours_with_rows = store.search.neighbours_with_rows

    def counted(*args: Any) -> float:
        nonlocal weighed_texts
        weighed_texts += 1
        return real(*args)

    async def reading(*args: Any, **kwargs: Any) -> tuple[dict[int, list[tuple[int, int]]], list[StoredMessage]]:
        around, others = await neighbours_with_rows(*args, **kwargs)
        read[bounded] += len(others)
        return around, others

    queries = ["what about the garden water?", "tomato seed in the rain", "basil compost spade", "hose"]
    for limit in (3, 10, 20):
        for query in queries:
            monkeypatch.setattr(weighing, "weighed_one", counted)
            monkeypatch.setattr(store.search, "neighbours_with_rows", reading)
            weighed_texts, bounded = 0, 0
            pruned = await search.search(ALICE, query, limit=limit)
            pruned_count = weighed_texts
            monkeypatch.setattr(hybrid, "best_weighed", weigh_all)
            monkeypatch.setattr(hybrid, "least_final", lambda *_: (None, {}))  # every neighbour read
            weighed_texts, bounded = 0, 1
            full = await search.search(ALICE, query, limit=limit)
            full_count = weighed_texts
            monkeypatch.undo()
            assert [(h.message.rowid, h.score, h.context_of, h.asked and h.asked.message.rowid) for h in pruned] == [
                (h.message.rowid, h.score, h.context_of, h.asked and h.asked.message.rowid) for h in full
            ]
            assert len(pruned) == limit
            # Weighing every candidate and neighbour (~4 a candidate) reads several times the texts.
            assert pruned_count < full_count / 2, (limit, query, pruned_count, full_count)
    assert read[0] < read[1] / 2, read
