"""Hybrid search weighs (reads the words of) only the messages that can reach its best `limit`: a
message's final score is at most its spread score, so weighing stops at the first whose spread score
is below the `limit`-th best final score found (decision 351). Same hits, same scores, same order as
weighing every candidate and neighbour, which the search did before."""

from __future__ import annotations

import random

import pytest

import klaw.memory.hybrid_search as hybrid
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.message_weight import weighed
from klaw.memory.neighbour_scores import Spread
from klaw.store.records import Role, StoredMessage
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation

WORDS = ["garden", "water", "tomato", "seed", "sun", "rain", "hose", "soil", "basil", "fence", "shed", "spade"]


def weigh_all(
    spread: dict[int, Spread], messages: dict[int, StoredMessage], replied: set[int], limit: int
) -> dict[int, float]:
    """Every message weighed, as the search did before."""
    return {rowid: hybrid._weighed(spread, messages, replied, rowid) for rowid in spread if rowid in messages}


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
    real = weighed

    def counted(score: float, own: float, text: str, *, replied: bool) -> float:
        nonlocal weighed_texts
        weighed_texts += 1
        return real(score, own, text, replied=replied)

    queries = ["what about the garden water?", "tomato seed in the rain", "basil compost spade", "hose"]
    for limit in (3, 10, 20):
        for query in queries:
            monkeypatch.setattr(hybrid, "weighed", counted)
            weighed_texts = 0
            pruned = await search.search(ALICE, query, limit=limit)
            pruned_count = weighed_texts
            monkeypatch.setattr(hybrid, "_best_weighed", weigh_all)
            weighed_texts = 0
            full = await search.search(ALICE, query, limit=limit)
            full_count = weighed_texts
            monkeypatch.undo()
            assert [(h.message.rowid, h.score, h.context_of, h.asked and h.asked.message.rowid) for h in pruned] == [
                (h.message.rowid, h.score, h.context_of, h.asked and h.asked.message.rowid) for h in full
            ]
            assert len(pruned) == limit
            # Weighing every candidate and neighbour (~4 a candidate) reads several times the texts.
            assert pruned_count < full_count / 2, (limit, query, pruned_count, full_count)
