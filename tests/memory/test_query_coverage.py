"""The coverage step of hybrid search (memory/query_coverage.py, decision 232): the message holding
more of what was asked ranks higher, on a real SQLite file with the fake embedder, and reaches
auto-RAG's block."""

from __future__ import annotations

import random

import pytest

from klaw.config import AutoRagConfig, SearchConfig
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.hybrid_search import HybridSearch, top_hits
from klaw.memory.query_coverage import QueryCoverage, coverage_factor, covered_share, query_words, stem
from klaw.memory.word_evidence import same_word
from klaw.store.records import Role
from klaw.store.sqlite.fts_query import words_of
from klaw.store.sqlite.store import SqliteStore
from tests.engine.test_recall_end_to_end import TALK
from tests.memory.recall_helpers import ALICE, Conversation

QUESTION = "Was the flood in the kitchen sink bad?"
LEAK = "On Monday morning the pipe under the kitchen sink burst while we were away, a bad leak that soaked the floor."
# "flood" is said only here, so bm25 weighs it most; each holds two of the question's four words.
FLOODS = [
    "The flood was bad in the town, the worst in the region.",
    "In the north the flood was bad, the river was in the streets.",
    "The flood in the valley was bad, the fields were in the water.",
]
# "kitchen" and "sink" are said often in this chat: each weighs less in bm25 than "flood".
KITCHEN_AND_SINK = [
    "The kitchen window faces the park.",
    "I cleaned the kitchen cupboards.",
    "Our kitchen radio is broken.",
    "The kitchen clock runs late.",
    "The sink plug is missing.",
    "A sink full of dishes again.",
    "The bathroom sink is white.",
    "The sink tap is new.",
]


async def leak_chat(store: SqliteStore) -> Conversation:
    """The leak, then the floods and the kitchen lines each after a line of other talk, every line
    answered "Noted." by the agent."""
    chat = await Conversation(store).bind()
    said = [LEAK]
    for talk, line in zip(TALK, [*FLOODS, *KITCHEN_AND_SINK], strict=False):
        said += [talk, line]
    for text in [*said, *TALK[len(FLOODS) + len(KITCHEN_AND_SINK) :]]:
        await chat.say(text)
        await chat.say("Noted.", Role.ASSISTANT)
    return chat


async def test_the_message_holding_more_of_the_question_is_in_the_top_three(store: SqliteStore) -> None:
    """The leak holds "kitchen", "sink" and "bad" (three of four words), each flood line "flood" and
    "bad" (two), but "flood" is the rarer word: without the coverage step the three floods take auto-RAG's
    `topK` 3 places and the leak is not among them."""
    chat = await leak_chat(store)
    hits = await HybridSearch(store, chat.embedder).search(ALICE, QUESTION)
    assert hits[0].message.content == LEAK

    recalled = await AutoRagService(AutoRagConfig(), HybridSearch(store, chat.embedder)).recall(
        ALICE, await chat.segment_id(), QUESTION, ()
    )
    assert LEAK in [r.hit.message.content for r in recalled]

    without = await HybridSearch(store, chat.embedder, SearchConfig(coverage_weight=0)).search(ALICE, QUESTION)
    assert LEAK not in [h.message.content for h in top_hits(without, 3)]  # what the step changes


@pytest.mark.parametrize(
    ("word", "same_as"),
    [
        ("painted", "painting"),
        ("dogs", "dog"),
        ("boxes", "box"),
        ("running", "run"),
        ("hiked", "hike"),
        ("adoption", "adopt"),
        ("шарика", "шарик"),
    ],
)
def test_forms_of_a_word_count_as_the_word(word: str, same_as: str) -> None:
    assert covered_share(query_words(same_as), [word]) == 1.0


def test_function_words_small_texts_and_unspaced_scripts_give_no_factor() -> None:
    assert query_words("what is it?") == []  # only function words: nothing to cover
    assert query_words("旺财在哪里") == []  # no word boundaries: the step is off for this text
    assert query_words("旺财 Zorblax 在哪里") == [stem("zorblax")]  # a Latin name inside still counts
    assert coverage_factor(0.5, [], ["anything"]) == 1.0
    assert coverage_factor(0.0, query_words("kitchen sink"), ["kitchen sink"]) == 1.0
    assert coverage_factor(0.5, query_words("kitchen sink"), ["the kitchen"]) == pytest.approx(1.25)
    assert covered_share(query_words("INV-2291 invoice"), ["invoice inv 2291"]) == 1.0  # codes matched whole
    assert covered_share(query_words("red boxes"), ["Fred's box"]) == 0.5  # "red" is not in "fred"


def test_one_coverage_weighs_many_messages_as_each_alone() -> None:
    """A search weighs its hits with one `QueryCoverage`, which stems each distinct word once: every
    message's share is still the rule's, word by word (a stem held when it is any held word's
    `same_word`), whatever the messages weighed before it held."""
    questions = ["Did Zorblax paint the boxes in Lisbon?", "INV-2291 invoice hikes", "Шарика нашли? running dogs"]
    messages = [
        "Zorblaxes painted boxes",
        "I painted the box red, Fred's box",
        "Lisbon trip: hiking, running and a dog",
        "INV 2291 was the invoice for the hike",
        "Шарик нашёлся, the dogs ran",
        "Paint",
        "paint PAINT painting",
        "",
        "ok thanks",
    ]
    for question in questions:
        wanted = query_words(question)
        coverage = QueryCoverage(wanted)
        for texts in [*([text] for text in [*messages, *reversed(messages)]), messages[:3], messages]:
            held = {stem(word) for text in texts for word in words_of(text)}
            rule = sum(1 for q in wanted if any(same_word(q, h) for h in held)) / len(wanted)
            assert coverage.share(texts) == covered_share(wanted, texts) == rule


def test_each_word_is_matched_as_the_same_word_rule_says() -> None:
    """Coverage compares a word only with the wanted stems that begin as it does (decision 266):
    the stems it finds are those `same_word` finds among all of them."""
    rng = random.Random(3)

    def word() -> str:
        return "".join(rng.choice("abcdeé") for _ in range(rng.randint(1, 8)))

    for _ in range(3000):
        wanted = list(dict.fromkeys(word() for _ in range(rng.randint(0, 6))))
        coverage = QueryCoverage(wanted)
        for _ in range(5):
            held = word()
            assert coverage._same_as(held) == frozenset(q for q in wanted if same_word(q, held)), (wanted, held)


def test_a_word_no_wanted_stem_begins_is_matched_as_the_rule_says() -> None:
    """Coverage takes a word's stem only when a wanted stem's key begins the word (decision 273): a
    stem is the word with an ending cut off, so what it finds is what `same_word` finds between the
    word's stem and every wanted stem, for words with and without endings, short ones, and other scripts."""
    rng = random.Random(5)
    endings = ["", "", "s", "es", "xes", "ing", "ed", "ly", "e", "ches", "ss", "nning"]

    def word() -> str:
        letters = "".join(rng.choice("abcdeéж1") for _ in range(rng.randint(1, 7)))
        return letters + rng.choice(endings)

    for _ in range(3000):
        wanted = list(dict.fromkeys(stem(word()) for _ in range(rng.randint(1, 6))))
        coverage = QueryCoverage(wanted)
        for _ in range(8):
            held = word()
            assert held.startswith(stem(held))
            expected = frozenset(q for q in wanted if same_word(q, stem(held)))
            assert coverage._matched(held) == expected, (wanted, held)
