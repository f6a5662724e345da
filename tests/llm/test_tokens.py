"""`approximate_token_count`: four ASCII characters a token, two of anything else, counted in C.

The count runs on every layer, window message and tool schema of every turn; it must give exactly
what counting character by character gives, whatever the text holds (lone surrogates included:
text read from a log line can carry them)."""

from __future__ import annotations

import math
import random

from klaw.llm.tokens import approximate_token_count


def by_character(text: str) -> int:
    if not text:
        return 0
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return max(1, math.ceil(ascii_chars / 4 + (len(text) - ascii_chars) / 2))


def test_ascii_and_other_scripts_are_weighed_apart() -> None:
    assert approximate_token_count("") == 0
    assert approximate_token_count("a") == 1
    assert approximate_token_count("abcd" * 3) == 3
    assert approximate_token_count("日本語の") == 2
    assert approximate_token_count("Привет, world") == 5  # 6 Cyrillic (3) + 7 ASCII (1.75)
    assert approximate_token_count("\ud800abc") == 2  # a lone surrogate counts as a non-ASCII character


def test_the_count_is_the_character_by_character_count() -> None:
    rng = random.Random(19)
    alphabet = "ab Z\n\t\x00\x7f\x80é日😀ж\ud800\udfff"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert approximate_token_count(text) == by_character(text), repr(text)
