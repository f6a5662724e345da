"""Approximate token counting, in one place, for every budget decision.

A real tokenizer per model would be exact but costs a dependency and milliseconds per message on a
Raspberry Pi; budgets already keep a 10 % safety margin, so an estimate is enough. English BPE
vocabularies average about four characters per token; other scripts (Cyrillic, CJK) average far
fewer characters per token, so non-ASCII characters are counted at two per token to stay on the
safe side of the budget.

Every turn counts its layers, its window and the tools' schemas (several thousand characters), so
the count runs in C: ASCII characters are what an ASCII encoding keeps when it drops the rest, not a
Python loop over characters (which took ~2 ms for the tools array on a loaded 2-core machine).
"""

from __future__ import annotations

import math


def approximate_token_count(text: str) -> int:
    """Estimated tokens in `text`: 0 for empty text, at least 1 otherwise."""
    if not text:
        return 0
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
    other_chars = len(text) - ascii_chars
    return max(1, math.ceil(ascii_chars / 4 + other_chars / 2))
