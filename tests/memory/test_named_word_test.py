"""The gate's name test (memory/word_evidence.py, decision 448): which candidates hold a content word of the
question written like a name or code. Checked against the rule as decision 080 words it, over seeded random
messages, and for its cost: each distinct word of the candidates is compared with the question's words once,
and only with those beginning as it does (the word-by-word test compared every pair: ~2 ms of the event
loop a turn's gate at 1k messages)."""

from __future__ import annotations

import random

import pytest

from klaw.memory import word_evidence
from klaw.memory.word_evidence import _named_holders, content_words, named_words, same_word
from klaw.store.records import ChatRef, MessageRecord, Role, StoredMessage
from klaw.store.sqlite.fts_query import WORD

CHAT = ChatRef("test", "main")
# Names, codes, their longer forms, short words, function words and small talk, in several writings.
VOCABULARY = [
    "Zorblax", "zorblax", "Zorblaxes", "ZORB", "zorb", "INV-2291", "2291", "inv", "Kraków", "kraków",
    "NASA", "nasa", "Lisbon", "lisbon", "Lisbonite", "garden", "Garden", "gardens", "trip", "Trip", "to",
    "the", "ok", "thanks", "A", "I", "Al", "al", "Bob", "bob", "Bobby", "x1", "Écoles", "école", "東京", "東京Tower",
]  # fmt: skip
ENDS = ["", "", "", ".", "!", "?", ",", ":", "\n", " ", "  \n ", "。"]


def reference_named_words(text: str) -> set[str]:
    """`named_words` as it was written before decision 448 (a copy of the text before each word)."""
    found: set[str] = set()
    for match in WORD.finditer(text):
        token = match.group(0)
        before = text[: match.start()].rstrip()
        inside = bool(before) and before[-1] not in ".!?:\n。！？："
        if any(ch.isdigit() for ch in token) or (len(token) > 1 and token.isupper()) or (inside and token[0].isupper()):
            found.add(token.lower())
    return found


def reference_holders(text: str, messages: list[StoredMessage], exclude: set[int]) -> set[int]:
    """Decision 080's rule word by word: a message passes when, for one content word of `text`, a word of
    its own is that word (`same_word`) and a name of its own or of `text` is that word too."""
    words = content_words(text)
    asked = reference_named_words(text)
    found = set()
    for message in messages:
        if message.rowid in exclude:
            continue
        said = {token.lower() for token in WORD.findall(message.content)}
        names = reference_named_words(message.content) | asked
        if any(any(same_word(c, w) for c in said) and any(same_word(c, w) for c in names) for w in words):
            found.add(message.rowid)
    return found


def sentence(rng: random.Random) -> str:
    return "".join(rng.choice(VOCABULARY) + rng.choice(ENDS) + " " for _ in range(rng.randint(0, 9))).strip(" ")


def stored(rowid: int, content: str) -> StoredMessage:
    return StoredMessage(rowid, 1, MessageRecord(CHAT, Role.USER, content))


@pytest.mark.parametrize("seed", range(2))
def test_the_name_test_passes_the_messages_the_rule_passes(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        question = sentence(rng)
        messages = [stored(rowid, sentence(rng)) for rowid in range(1, rng.randint(2, 40))]
        exclude = {rowid for rowid in range(1, 40) if rng.random() < 0.1}
        assert named_words(question) == reference_named_words(question), question
        assert _named_holders(question, messages, exclude) == reference_holders(question, messages, exclude), question


def test_a_name_inside_a_sentence_after_spaces_and_line_ends() -> None:
    assert named_words("we met  Zorblax") == {"zorblax"}
    assert named_words("we met.\n  Zorblax came") == set()  # a sentence begins with it
    assert named_words("Zorblax came, then Bob") == {"bob"}
    assert named_words("code INV-2291 and NASA") == {"inv", "2291", "nasa"}


def test_each_distinct_word_is_compared_once_with_the_words_beginning_as_it_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """40 candidates of 30 words each, 5 content words asked: compared pair by pair that is ~6,000
    comparisons; the words of the candidates begin as one asked word at most 40 distinct times."""
    compared: list[tuple[str, str]] = []

    def counted(a: str, b: str) -> bool:
        compared.append((a, b))
        return same_word(a, b)

    monkeypatch.setattr(word_evidence, "same_word", counted)
    rng = random.Random(7)
    filler = [f"word{n}" for n in range(200)]
    messages = [
        stored(rowid, " ".join(rng.choice(filler) for _ in range(29)) + (" Zorblax" if rowid % 9 == 0 else " garden"))
        for rowid in range(1, 41)
    ]
    holders = _named_holders("what did Zorblax say about the garden trip to Lisbon in 2291?", messages, set())
    assert holders == {9, 18, 27, 36}
    assert len(compared) <= 40, len(compared)
