"""Synthetic chat text whose word frequencies follow Zipf's law, for benchmarks at scale.

Full-text search cost depends on how many messages each query word matches, so a benchmark over a
tiny vocabulary (every word in a quarter of the messages) measures a corpus no person writes.
Natural language is Zipfian: a few function words everywhere, a long tail of rare content words.
This generator puts real English function words at the top ranks (so stop-word handling is
exercised) and pronounceable made-up words below them. Deterministic for a seed; no data files.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from klaw.store.records import ChatRef, MessageRecord, Role

BENCH_START = datetime(2024, 1, 1, tzinfo=UTC)  # when a bench chat's first message is sent
MESSAGE_SPACING_S = 30

FUNCTION_WORDS = [
    "the",
    "i",
    "you",
    "to",
    "and",
    "a",
    "of",
    "it",
    "is",
    "that",
    "in",
    "we",
    "was",
    "for",
    "what",
    "my",
    "on",
    "have",
    "be",
    "do",
    "with",
    "so",
    "but",
    "this",
    "me",
    "are",
    "not",
    "at",
    "can",
    "just",
    "did",
    "about",
    "how",
    "your",
    "will",
    "from",
    "there",
    "they",
    "when",
    "if",
    "all",
    "one",
    "out",
    "up",
    "get",
    "like",
    "would",
    "know",
    "think",
    "yes",
    "no",
    "time",
    "well",
    "then",
    "good",
    "really",
    "our",
    "going",
]
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mo",
    "la",
    "ne",
    "su",
    "vi",
    "do",
    "pa",
    "ro",
    "te",
    "mi",
    "sa",
    "lu",
    "ge",
    "no",
    "fa",
    "be",
    "zo",
    "ha",
    "ki",
    "ru",
    "ma",
    "de",
    "li",
    "po",
    "na",
    "go",
    "ta",
    "se",
    "bu",
]


SYLLABLE_ARRAY = np.asarray(SYLLABLES)


@functools.cache
def _vocabulary(seed: int, vocabulary: int, exponent: float) -> tuple[Any, Any, Any, Mapping[str, Any]]:
    """A seed's words, their Zipf probabilities and running sum, and the generator's state after drawing
    them: made once a process (~1 s under load), for the fill and the questions of the turn bench alike
    (decision 434). `integers` into the syllables draws what `choice(SYLLABLES, size)` drew, without
    making the list an array on each of the 20,000 calls (4x faster, the same words)."""
    rng = np.random.default_rng(seed)
    words = list(FUNCTION_WORDS)
    seen = set(words)
    while len(words) < vocabulary:
        word = "".join(SYLLABLE_ARRAY[rng.integers(0, len(SYLLABLES), size=int(rng.integers(2, 5)))])
        if word not in seen:
            seen.add(word)
            words.append(word)
    weights = 1.0 / np.arange(1, vocabulary + 1) ** exponent
    p = weights / weights.sum()
    # What `Generator.choice(len(words), size, p=p)` computes on every call, once: it sums and checks the
    # 20,000 probabilities, then looks up uniform draws in their running sum. Drawing the same way gives
    # the same words from the same seed (tests/bench/test_corpus.py) at a twentieth of the cost: it was
    # half of `bench scale`'s fill (decision 273).
    cdf = p.cumsum()
    cdf /= cdf[-1]
    for array in (p, cdf):
        array.flags.writeable = False
    return np.asarray(words), p, cdf, rng.bit_generator.state


class ZipfCorpus:
    def __init__(self, seed: int = 7, vocabulary: int = 20_000, exponent: float = 1.07) -> None:
        self._words, self._p, self._cdf, state = _vocabulary(seed, vocabulary, exponent)
        self._rng = np.random.default_rng(seed)
        self._rng.bit_generator.state = copy.deepcopy(state)  # where drawing the words left it

    def redrawn(self, seed: int) -> ZipfCorpus:
        """This corpus (the same vocabulary and frequencies) drawing its sentences from `seed` onward: a
        second stream of the same words, e.g. the turn bench's questions about its fill (decision 434)."""
        self._rng = np.random.default_rng(seed)
        return self

    def sentence(self, min_words: int = 5, max_words: int = 30) -> str:
        count = int(self._rng.integers(min_words, max_words + 1))
        return " ".join(self._words[self._cdf.searchsorted(self._rng.random(count), side="right")])

    def sentences(self, n: int, min_words: int = 5, max_words: int = 30) -> list[str]:
        return [self.sentence(min_words, max_words) for _ in range(n)]

    def chat_records(self, chat: ChatRef, first: int, count: int, start: datetime) -> list[MessageRecord]:
        """Messages `first` … `first + count - 1` of a bench chat: user and assistant in turn, 30 s
        apart from `start`, so batches written one after another make one conversation."""
        return [
            MessageRecord(
                chat=chat,
                role=Role.USER if (first + i) % 2 == 0 else Role.ASSISTANT,
                content=self.sentence(),
                created_at=start + timedelta(seconds=MESSAGE_SPACING_S * (first + i)),
            )
            for i in range(count)
        ]
