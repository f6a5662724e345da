"""The bench corpus draws the same words from the same seed as `Generator.choice` with the word
probabilities did, so a chat filled by today's `klaw bench scale` is the chat earlier figures were
measured on (decision 273 draws from the running sum computed once, a twentieth of the cost)."""

from __future__ import annotations

import copy

import numpy as np

from klaw.bench.corpus import ZipfCorpus


def choice_sentences(corpus: ZipfCorpus, n: int, min_words: int, max_words: int) -> list[str]:
    """The sentences of the corpus as drawn before: `rng.choice` with `p` on every sentence."""
    rng: np.random.Generator = corpus._rng
    words, p = corpus._words, corpus._p
    sentences = []
    for _ in range(n):
        count = int(rng.integers(min_words, max_words + 1))
        sentences.append(" ".join(words[rng.choice(len(words), size=count, p=p)]))
    return sentences


def test_the_same_seed_gives_the_same_sentences_as_drawing_with_choice() -> None:
    # each reference sentence is a draw over the whole vocabulary: a hundred show the same stream. A copy
    # of a fresh corpus (its generator at the same state) draws the reference: building one takes ~1 s.
    for seed, n, shortest, longest in ((7, 300, 5, 30), (11, 100, 6, 20)):
        corpus = ZipfCorpus(seed=seed)
        reference = copy.deepcopy(corpus)
        assert corpus.sentences(n, min_words=shortest, max_words=longest) == choice_sentences(
            reference, n, shortest, longest
        )
