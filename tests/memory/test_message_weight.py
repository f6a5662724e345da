"""Hybrid search on a real store: what a message asks, and a message of a few words, weigh less than
what a message tells (docs/decisions/209-asking-and-few-words-weigh-less.md)."""

from __future__ import annotations

import pytest

from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.message_weight import asking_share, length_factor
from klaw.store.records import Role
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation


@pytest.fixture
async def chat(store: SqliteStore) -> Conversation:
    return await Conversation(store).bind()


async def test_what_a_message_tells_comes_before_a_question_in_the_same_words(chat: Conversation) -> None:
    told = await chat.say("We painted the kitchen walls sage green on Sunday, finally done with that job.", embed=False)
    await chat.filler(3, embed=False)
    asked = await chat.say("Which colour will you paint the kitchen walls?", Role.ASSISTANT, embed=False)
    await chat.say("Not decided yet, I keep changing my mind every week.", embed=False)
    await chat.filler(3, embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "kitchen walls")
    order = [h.message.rowid for h in hits]
    assert order[0] == told.rowid and asked.rowid in order


async def test_a_question_nobody_answered_keeps_its_score(chat: Conversation) -> None:
    await chat.say("filler before", embed=False)
    asked = await chat.say("Which colour will you paint the kitchen walls?", embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "kitchen walls colour")
    assert hits[0].message.rowid == asked.rowid


async def test_a_few_words_rank_below_a_message_that_says_something(chat: Conversation) -> None:
    await chat.filler(3, embed=False)
    told = await chat.say("my sister and I watched the zeppelin land in the field behind the old farm", embed=False)
    await chat.filler(3, embed=False)
    shout = await chat.say("Zeppelin!", embed=False)
    await chat.filler(3, embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "zeppelin")
    order = [h.message.rowid for h in hits]
    assert order[0] == told.rowid and shout.rowid in order


def test_asking_share_and_length_factor() -> None:
    assert asking_share("Cool! What did it look like?") == pytest.approx(22 / 27)
    assert asking_share("It stands for freedom.") == 0.0
    assert asking_share("你喜欢什么颜色？") == 1.0
    assert asking_share("") == 0.0
    assert length_factor("Agreed!") == 0.25
    assert length_factor("我们去了卡尔卡松") == pytest.approx(8 / 11)  # each CJK character a word
    assert length_factor("") == 0.0
