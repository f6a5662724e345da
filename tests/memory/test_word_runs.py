"""The words hybrid search counts and compares in every message it ranks (`word_runs`, decision 266):
an ASCII text takes a faster path than the regex, and must find exactly the words the regex finds."""

from __future__ import annotations

import random

from klaw.memory.message_weight import length_factor
from klaw.memory.query_coverage import QueryCoverage, query_words
from klaw.store.sqlite.fts_query import WORD, word_runs, words_of

SAMPLES = [
    "",
    "   ",
    "Don't forget: the deploy's at 9:30 (UTC)!",
    "snake_case and CamelCase, x86_64; a--b__c",
    "tabs\tand\nnewlines\r\x0bvertical\x0cfeed\x1cfile-separator\x7fdel",
    "ids: inv2291, #42, 3.14, e-mail@example.org",
    "Café — naïve résumé",  # not ASCII: the regex's path
    "我们叫Mimi吧, ok?",
]


def test_the_ascii_path_finds_the_words_the_regex_finds() -> None:
    rng = random.Random(7)
    alphabet = "".join(chr(c) for c in range(128))
    texts = SAMPLES + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    for text in texts:
        assert word_runs(text) == WORD.findall(text), repr(text)
        assert words_of(text) == [word.lower() for word in WORD.findall(text)], repr(text)


def test_a_message_is_weighed_and_covered_by_those_words() -> None:
    assert length_factor("Don't forget the deploy") == 5 / 8  # don, t, forget, the, deploy
    assert length_factor("!!! ???") == 0.0
    coverage = QueryCoverage(query_words("when was the deploy painted?"))
    assert coverage.share(["We painted it; the deploys went fine"]) == 1.0
    assert coverage.share(["nothing here"]) == 0.0
