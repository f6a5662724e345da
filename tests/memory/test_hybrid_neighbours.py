"""Hybrid search's ranking on a real store: weighted fusion of the two sides, and neighbouring
messages sharing a hit's score (the store's `neighbours` lookup included)."""

from __future__ import annotations

import pytest

from klaw.config import AutoRagConfig, SearchConfig
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.hybrid_search import HybridSearch
from klaw.store.records import MessageType, Role
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, BOB, Conversation, FixedEmbedder, one_hot

NO_NEIGHBOURS = SearchConfig(neighbour_weight=0.0)


@pytest.fixture
async def chat(store: SqliteStore) -> Conversation:
    return await Conversation(store).bind()


async def test_store_neighbours_skip_tool_records_and_stay_in_the_segment(chat: Conversation) -> None:
    first = await chat.say("hello there")
    asked = await chat.say("how did the interview go?", Role.ASSISTANT)
    await chat.say("lookup", Role.ASSISTANT, type=MessageType.TOOL_CALL, metadata={"tool_calls": []}, embed=False)
    await chat.say("{}", Role.TOOL, type=MessageType.TOOL_RESULT, embed=False)
    answer = await chat.say("great, they offered me the job")
    await chat.say("other chat", chat=BOB)
    await chat.new_segment()
    await chat.say("a new topic")
    found = await chat.store.search.neighbours([asked, answer], 2)
    assert found[asked.rowid] == [(first.rowid, 1), (answer.rowid, 1)]
    assert found[answer.rowid] == [(asked.rowid, 1), (first.rowid, 2)]
    assert await chat.store.search.neighbours([answer], 1) == {answer.rowid: [(asked.rowid, 1)]}
    assert await chat.store.search.neighbours([answer], 0) == {}
    assert await chat.store.search.neighbours([], 2) == {}


async def test_a_message_next_to_a_hit_enters_the_ranking_as_its_neighbour(chat: Conversation) -> None:
    await chat.filler(3)
    # Two before the hit: the message right before it is found by its words too (`following`).
    opening = await chat.say("guess who called me this morning", embed=False)
    await chat.say("you will never guess", embed=False)
    news = await chat.say("the bakery from the interview, they offered me the job")
    await chat.filler(3)
    # Without the coverage step (decision 232), which raises the hit holding both words and not its neighbour.
    search = HybridSearch(chat.store, chat.embedder, SearchConfig(coverage_weight=0))
    hits = await search.search(ALICE, "bakery interview")
    assert hits[0].message.rowid == news.rowid
    found = {h.message.rowid: h for h in hits}[opening.rowid]
    assert (found.distance, found.fts_rank, found.bm25, found.context_of) == (None, None, None, news.rowid)
    assert 0.2 * hits[0].score <= found.score < hits[0].score  # its share, plus what the others lend
    plain = await HybridSearch(chat.store, chat.embedder, NO_NEIGHBOURS).search(ALICE, "bakery interview")
    assert opening.rowid not in {h.message.rowid for h in plain}
    assert all(h.context_of is None for h in plain)


async def test_excluded_messages_are_never_added_as_neighbours(chat: Conversation) -> None:
    question = await chat.say("how did the interview at the bakery go?")
    answer = await chat.say("great, they offered me the job", Role.ASSISTANT, embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "bakery interview", exclude=[answer.rowid])
    assert [h.message.rowid for h in hits] == [question.rowid]


async def test_neighbours_come_from_the_hits_own_segment_only(chat: Conversation) -> None:
    await chat.say("filler before", embed=False)
    question = await chat.say("how did the interview at the bakery go?")
    await chat.new_segment()
    later = await chat.say("completely new subject", embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "bakery interview")
    assert later.rowid not in {h.message.rowid for h in hits}
    assert question.rowid == hits[0].message.rowid


async def test_vector_weight_decides_between_a_meaning_hit_and_a_word_hit(chat: Conversation) -> None:
    meaning = await chat.say("something phrased quite differently", vector=one_hot(0))
    await chat.filler(3, embed=False)
    words = await chat.say("the zeppelin landed", vector=one_hot(1))
    query = FixedEmbedder(one_hot(0))

    async def order(weight: float) -> list[int]:
        config = SearchConfig(vector_weight=weight, neighbour_weight=0.0)
        hits = await HybridSearch(chat.store, query, config).search(ALICE, "zeppelin")
        return [h.message.rowid for h in hits if h.message.rowid in (meaning.rowid, words.rowid)]

    # Default 0.4: the only full-text match (0.6 + 0.4 × 0.1) beats the closest vector (0.4).
    assert await order(0.4) == [words.rowid, meaning.rowid]
    assert await order(0.8) == [meaning.rowid, words.rowid]
    assert await order(0.0) == [words.rowid, meaning.rowid]


async def test_limit_bounds_the_results_neighbours_included(chat: Conversation) -> None:
    for i in range(6):
        await chat.say(f"deploy note {i} with padding words", embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "deploy", limit=3)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_auto_rag_keeps_a_neighbour_only_when_its_lender_is_kept(chat: Conversation) -> None:
    topic = await chat.say("the deploy moves to friday", vector=one_hot(0))
    reply = await chat.say("noted, I will tell the team", Role.ASSISTANT, embed=False)
    await chat.filler(3, embed=False)
    unrelated = await chat.say("something else entirely", vector=one_hot(1))  # distance 1: over the threshold
    after_unrelated = await chat.say("sure", Role.ASSISTANT, embed=False)
    rag = AutoRagService(AutoRagConfig(top_k=10, max_tokens=4000), HybridSearch(chat.store, FixedEmbedder(one_hot(0))))
    recalled = [r.hit.message.rowid for r in await rag.recall(ALICE, await chat.segment_id(), "deploy friday?", ())]
    assert recalled[:2] == [topic.rowid, reply.rowid]
    assert unrelated.rowid not in recalled and after_unrelated.rowid not in recalled


async def test_a_blank_neighbour_is_never_returned(chat: Conversation) -> None:
    question = await chat.say("how did the interview at the bakery go?")
    await chat.say(" \n\t", Role.ASSISTANT, embed=False)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "bakery interview")
    assert [h.message.rowid for h in hits] == [question.rowid]
