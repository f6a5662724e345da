"""The bench corpus draws the same words from the same seed as `Generator.choice` with the word
probabilities did, so a chat filled by today's `klaw bench scale` is the chat earlier figures were
measured on (decision 273 draws from the running sum computed once, a twentieth of the cost)."""

from __future__ import annotations

import numpy as np

from klaw.bench.corpus import ZipfCorpus


def choice_sentences(seed: int, n: int, min_words: int, max_words: int) -> list[str]:
    """The sentences of the corpus as drawn before: `rng.choice` with `p` on every sentence."""
    corpus = ZipfCorpus(seed=seed)
    rng: np.random.Generator = corpus._rng
    words, p = corpus._words, corpus._p
    sentences = []
    for _ in range(n):
        count = int(rng.integers(min_words, max_words + 1))
        sentences.append(" ".join(words[rng.choice(len(words), size=count, p=p)]))
    return sentences


def test_the_same_seed_gives_the_same_sentences_as_drawing_with_choice() -> None:
    # each reference sentence is a draw over the whole vocabulary (~8 ms): a few hundred show the same stream
    assert ZipfCorpus(seed=7).sentences(300) == choice_sentences(7, 300, 5, 30)
    assert ZipfCorpus(seed=11).sentences(100, min_words=6, max_words=20) == choice_sentences(11, 100, 6, 20)
