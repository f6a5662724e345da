"""Approximate token counting, in one place, for every budget decision.

A real tokenizer per model would be exact but costs a dependency and milliseconds per message on a
Raspberry Pi; budgets already keep a 10 % safety margin, so an estimate is enough. English BPE
vocabularies average about four characters per token; other scripts (Cyrillic, CJK) average far
fewer characters per token, so non-ASCII characters are counted at two per token to stay on the
safe side of the budget.
"""

from __future__ import annotations

import math


def approximate_token_count(text: str) -> int:
    """Estimated tokens in `text`: 0 for empty text, at least 1 otherwise."""
    if not text:
        return 0
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    other_chars = len(text) - ascii_chars
    return max(1, math.ceil(ascii_chars / 4 + other_chars / 2))
