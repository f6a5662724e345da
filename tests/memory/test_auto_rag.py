"""AutoRagService (AutoRagServiceTest, docs/decisions/009-carried-over-requirements.md) on a real store with
the fake embedder."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from klaw.config import AutoRagConfig
from klaw.llm.tokens import approximate_token_count
from klaw.memory.auto_rag import HEADER, MIN_EXCERPT_TOKENS, AutoRagService, fit_to_budget, format_block
from klaw.memory.hybrid_search import HybridHit, HybridSearch, top_hits
from klaw.store.records import MessageRecord, Role, StoredMessage
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, BOB, BrokenEmbedder, Conversation, FixedEmbedder, one_hot, rowids

DEPLOY = "the deploy moves to friday night after the database migration"
QUERY = "so the deploy moves to friday night after the migration?"


def service(chat: Conversation, embedder: Any = None, **settings: Any) -> AutoRagService:
    config = AutoRagConfig(**settings)
    return AutoRagService(config, HybridSearch(chat.store, chat.embedder if embedder is None else embedder))


@pytest.fixture
async def chat(store: SqliteStore) -> Conversation:
    return await Conversation(store).bind()


async def recall(rag: AutoRagService, chat: Conversation, query: str = QUERY, window: Any = ()) -> list[int]:
    recalled = await rag.recall(ALICE, await chat.segment_id(), query, window)
    return [r.hit.message.rowid for r in recalled]


async def test_query_is_close_enough_to_the_topic_for_the_default_threshold(chat: Conversation) -> None:
    vectors = await chat.embedder.embed([DEPLOY, QUERY])
    assert 1 - float(vectors[0] @ vectors[1]) < AutoRagConfig().relevance_threshold


async def test_returns_empty_when_disabled(chat: Conversation) -> None:
    await chat.say(DEPLOY)
    assert await recall(service(chat), chat) != []
    assert await recall(service(chat, enabled=False), chat) == []


async def test_returns_empty_without_vectors_and_without_full_text_match(chat: Conversation) -> None:
    await chat.filler(6, embed=False)
    assert await recall(service(chat), chat) == []


async def test_full_text_results_pass_when_the_vector_side_is_unavailable(chat: Conversation) -> None:
    topic = await chat.say(DEPLOY, embed=False)
    after = await chat.filler(4)
    recalled = await service(chat, embedder=BrokenEmbedder()).recall(ALICE, await chat.segment_id(), QUERY, ())
    # The match, then the two messages after it: the first found by full text through its context
    # column (the topic is the message before it), the second as the topic's neighbour.
    assert [r.hit.message.rowid for r in recalled] == [topic.rowid, after[0].rowid, after[1].rowid]
    assert [(r.hit.fts_rank, r.hit.context_of) for r in recalled] == [(1, None), (2, None), (None, topic.rowid)]


async def test_scoped_to_chat(chat: Conversation) -> None:
    await chat.say(DEPLOY, chat=BOB)
    await chat.filler(4)
    assert await recall(service(chat), chat) == []


async def test_scoped_to_segment(chat: Conversation) -> None:
    older = await chat.say(DEPLOY)
    await chat.new_segment()
    await chat.filler(4)
    assert await recall(service(chat), chat) == []
    newer = await chat.say(DEPLOY.replace("friday", "saturday"))
    recalled = await recall(service(chat), chat)
    assert recalled[0] == newer.rowid and older.rowid not in recalled


async def test_window_rowids_are_excluded(chat: Conversation) -> None:
    older = await chat.say(DEPLOY)
    newer = await chat.say(DEPLOY + " (confirmed)", Role.ASSISTANT)
    assert set(await recall(service(chat), chat)) == {older.rowid, newer.rowid}
    assert await recall(service(chat), chat, window=[newer.rowid]) == [older.rowid]
    assert await recall(service(chat), chat, window=[older.rowid, newer.rowid]) == []


async def test_respects_top_k(chat: Conversation) -> None:
    for day in ("monday", "tuesday", "wednesday", "thursday", "friday"):
        await chat.say(DEPLOY.replace("friday", day))
    assert len(await recall(service(chat), chat)) == 3
    assert len(await recall(service(chat, top_k=1), chat)) == 1


async def test_truncates_to_the_max_tokens_budget(chat: Conversation) -> None:
    for day in ("monday", "tuesday", "wednesday"):
        await chat.say(DEPLOY.replace("friday", day))
    rag = service(chat, max_tokens=50)
    recalled = await rag.recall(ALICE, await chat.segment_id(), QUERY, ())
    assert 0 < len(recalled) < 3
    assert approximate_token_count(format_block(recalled)) <= 50
    capped = await service(chat).recall(ALICE, await chat.segment_id(), QUERY, (), max_tokens=30)
    assert approximate_token_count(format_block(capped)) <= 30


async def test_a_message_longer_than_the_budget_is_shortened_at_a_word(chat: Conversation) -> None:
    long = await chat.say(" ".join([DEPLOY] * 12) + " and then we will check every service twice" * 4)
    recalled = await service(chat, max_tokens=120).recall(ALICE, await chat.segment_id(), QUERY, ())
    assert [r.hit.message.rowid for r in recalled] == [long.rowid]
    assert recalled[0].truncated and recalled[0].text.endswith("…")
    assert long.content.startswith(recalled[0].text[:-1])
    assert approximate_token_count(format_block(recalled)) <= 120


def stored(rowid: int, text: str) -> StoredMessage:
    return StoredMessage(rowid, 1, MessageRecord(ALICE, Role.USER, text))


def test_budget_skips_what_does_not_fit_and_keeps_a_shorter_hit() -> None:
    big = HybridHit(stored(1, "x" * 400), 0.03)
    small = HybridHit(stored(2, "short one"), 0.02)
    # Room for the header and a few words only: too little to excerpt `big`, enough for `small`.
    kept = fit_to_budget([big, small], MIN_EXCERPT_TOKENS)
    assert [r.hit.message.rowid for r in kept] == [2]


async def test_returns_empty_when_there_are_no_matches(chat: Conversation) -> None:
    assert await recall(service(chat), chat) == []  # an empty segment
    only = await chat.say(DEPLOY)
    assert await recall(service(chat), chat, window=[only.rowid]) == []


async def test_returns_empty_when_the_best_result_exceeds_the_threshold(chat: Conversation) -> None:
    # The messages match by full text, but their vectors are orthogonal to the query's (distance 1.0),
    # and the words they share with it are common in the segment (each in 3 of its messages), so they
    # are no evidence of their own.
    for _ in range(3):
        await chat.say(DEPLOY, vector=one_hot(1))
    far_query = FixedEmbedder(one_hot(0))
    assert await recall(service(chat, embedder=far_query), chat) == []
    assert await recall(service(chat, embedder=far_query, relevance_threshold=1.5), chat) != []


async def test_a_word_rare_in_the_segment_passes_the_gate_on_its_own(chat: Conversation) -> None:
    """A name said once is found by full text although every vector is far: the words alone are the
    evidence (the message after it may come along as its neighbour). A common word alone opens nothing."""
    fact = await chat.say("my sister's dog is called Zorblax", vector=one_hot(1))
    for i in range(3):
        await chat.say(f"the dog park was busy again today, round {i}", vector=one_hot(2))
    far_query = FixedEmbedder(one_hot(0))
    assert (await recall(service(chat, embedder=far_query), chat, query="recall? zorblax the dog"))[:1] == [fact.rowid]
    assert await recall(service(chat, embedder=far_query), chat, query="the dog") == []


async def test_small_talk_pulls_nothing(chat: Conversation) -> None:
    await chat.say(DEPLOY)
    await chat.say("thanks, sounds good")
    await chat.filler(4)
    assert await recall(service(chat), chat, query="ok") == []


async def test_block_lists_recalled_messages_oldest_first_with_roles(chat: Conversation) -> None:
    question = await chat.say("when is the deploy? friday night?")
    answer = await chat.say(DEPLOY, Role.ASSISTANT)
    recalled = await service(chat).recall(ALICE, await chat.segment_id(), QUERY, ())
    assert rowids([r.hit.message for r in recalled]) == {question.rowid, answer.rowid}
    block = format_block(recalled)
    assert block == f"{HEADER}\n\n[user] {question.content}\n[assistant] {answer.content}"
    assert block.startswith("From earlier in this conversation:\n\n")


async def test_any_exception_gives_empty_and_a_warning_without_content(
    chat: Conversation, caplog: pytest.LogCaptureFixture
) -> None:
    await chat.say(DEPLOY)

    class FailingSearch(HybridSearch):
        async def search(self, *args: Any, **kwargs: Any) -> list[HybridHit]:
            raise OSError(f"disk I/O error while reading {DEPLOY}")

    rag = AutoRagService(AutoRagConfig(), FailingSearch(chat.store, chat.embedder))
    with caplog.at_level(logging.DEBUG):
        assert await rag.recall(ALICE, await chat.segment_id(), QUERY, ()) == []
    assert "auto-RAG failed (OSError)" in caplog.text
    assert "friday" not in caplog.text and "deploy moves" not in caplog.text


async def test_vector_only_candidates_must_be_within_the_threshold_full_text_ones_need_not(chat: Conversation) -> None:
    # (the message before the keyword one is found by its words too: full_text's `following`)
    await chat.say("dolor sit amet", vector=one_hot(1))  # no shared word, orthogonal: just a neighbour
    close = await chat.say("lorem ipsum", vector=one_hot(0))  # no shared word, vector identical to the query's
    keyword = await chat.say(DEPLOY, vector=one_hot(2))  # shares words, orthogonal vector
    recalled = await recall(service(chat, embedder=FixedEmbedder(one_hot(0))), chat)
    assert set(recalled) == {close.rowid, keyword.rowid}


@pytest.mark.parametrize(
    "query",
    [
        'so the "deploy moves to friday',
        "deploy* (friday) NEAR(migration",
        "deploy: friday AND OR NOT migration?",
        "col:deploy -friday ^migration",
        "'; DROP TABLE messages;-- deploy friday migration",
        "{deploy} + [friday] 🚀 migration",
    ],
)
async def test_syntax_characters_in_the_message_still_recall_by_full_text_and_never_warn(
    chat: Conversation, query: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What a person types is text, never FTS5 syntax. Recall swallows every error (a turn must not
    fail), so a query that broke the full-text side would pass unseen but for the warning and the
    missing recall: both are checked. The vector side is down, so only full text can find the topic."""
    topic = await chat.say(DEPLOY, embed=False)
    await chat.filler(4, embed=False)
    rag = service(chat, embedder=BrokenEmbedder())
    with caplog.at_level(logging.WARNING):
        recalled = await recall(rag, chat, query=query)
    assert recalled[:1] == [topic.rowid]
    assert "auto-RAG failed" not in caplog.text


async def test_each_side_offers_at_most_twenty_candidates(chat: Conversation) -> None:
    """The spec's 20 candidates a side: however many messages match and however high topK and the
    budget are set, recall ranks at most 20 of them."""
    for i in range(30):
        await chat.say(f"deploy note {i}: the deploy moves to friday night after the migration", embed=i % 2 == 0)
    rag = service(chat, top_k=100, max_tokens=100_000)
    assert len(await recall(rag, chat)) == 20


@pytest.mark.parametrize(
    ("said", "asked"),
    [
        ("the invoice number was INV-2291, paid in full", "what about 2291?"),
        ("we stayed two nights in Carcassonne in the old town", "carcassonne"),
        ("NASA moved the launch window again", "any news from nasa?"),
    ],
)
async def test_a_name_or_code_said_once_opens_the_gate_whatever_the_vectors(
    chat: Conversation, said: str, asked: str
) -> None:
    fact = await chat.say(said, vector=one_hot(1))
    await chat.filler(4, embed=False)
    assert (await recall(service(chat, embedder=FixedEmbedder(one_hot(0))), chat, query=asked))[:1] == [fact.rowid]


async def test_a_rare_common_word_alone_does_not_open_the_gate(chat: Conversation) -> None:
    """In a long chat many ordinary words are said once; sharing one is no evidence that a message
    is meant ("research" asked about another person's project), so the vectors must decide."""
    await chat.say("my brother started his research on coral reefs", vector=one_hot(1))
    await chat.filler(4, embed=False)
    assert (
        await recall(service(chat, embedder=FixedEmbedder(one_hot(0))), chat, query="what did Caroline research?") == []
    )


QUESTION = "Lots of news from you this week! " * 8 + "Did you paint the bedroom walls in the end, and which colour won?"
REPLY = "Sage green, after trying nine sample pots on the plaster."


def test_a_reply_comes_with_the_question_that_lent_to_it_and_counts_as_one_hit() -> None:
    """The pair takes one of `topK`'s places, the question shown after its reply in rank (it reads
    before it in the block, oldest first) and not again as a hit of its own; other hits follow."""
    question = HybridHit(stored(1, QUESTION), 0.2)
    reply = HybridHit(stored(2, REPLY), 0.9, asked=question)
    others = [HybridHit(stored(rowid, f"other message number {rowid}"), 0.1) for rowid in (3, 4)]
    taken = top_hits([reply, others[0], question, others[1]], 3)
    assert [hit.message.rowid for hit in taken] == [2, 3, 4]
    kept = fit_to_budget(taken, 1000)
    shown = [(r.hit.message.rowid, r.question_of, r.truncated) for r in kept]
    assert shown == [(2, None, False), (1, 2, False), (3, None, False), (4, None, False)]


def test_a_tight_budget_keeps_the_end_of_the_question_where_it_asks() -> None:
    """Room for the reply and a few words more: the question is cut from its start, so what it asked
    is still there, and the block is full."""
    reply = HybridHit(stored(2, REPLY), 0.9, asked=HybridHit(stored(1, QUESTION), 0.2))
    room = approximate_token_count(HEADER + "\n\n") + approximate_token_count(f"[user] {REPLY}") + 1
    kept = fit_to_budget([reply, HybridHit(stored(3, "short one"), 0.1)], room + MIN_EXCERPT_TOKENS + 6)
    assert [r.hit.message.rowid for r in kept] == [2, 1]
    assert kept[1].truncated and kept[1].text.startswith("…") and kept[1].text.endswith("which colour won?")
    assert QUESTION.endswith(kept[1].text[1:])
    assert approximate_token_count(format_block(kept)) <= room + MIN_EXCERPT_TOKENS + 6
