"""Which search words are common enough that holding one of them alone does not make a message a
candidate for full text's ranking (PostgreSQL: decision 213; SQLite: decision 235).

A word held by 1 % of the messages or more (and at least `COMMON_MIN_HELD`) has a small idf: a
message holding it and no rarer word of the question scores one small term and seldom reaches the
best places, yet scoring every such message was most of a search's work at scale. So the
candidates are the messages holding a rare word or two common words, each scored on every word
exactly as the full ranking scores it; when they do not fill the places asked for, every match is
ranked as before. SQLite also ranks every match when the last candidate scores below what a message
of average length saying one common word once scores (decision 449); PostgreSQL does not ask it.
Both backends pair common words this way; each asks its own index which words are common (SQLite
counts the rows a word makes bm25 score, its neighbours' columns included, and calls a word common
from half that share: `sqlite/full_text.py`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

COMMON_SHARE = 0.01  # a word in this share of the messages or more (and `COMMON_MIN_HELD`) is common:
COMMON_MIN_HELD = 100  # its messages are candidates only with a rare or another common word
MAX_COMMON = 8  # at most 28 pairs in the candidates' query; more common words: the full ranking

T = TypeVar("T")


def common_cut(rows: float, at_least: int = COMMON_MIN_HELD, share: float = COMMON_SHARE) -> int:
    """The fewest messages holding a word that make it common, for an index of `rows` messages."""
    return max(at_least, math.ceil(share * rows))


def pairable(common: Sequence[T], matched: int) -> bool:
    """Whether candidates help a search of `matched` words of which `common` are common: some are,
    not too many to pair, and the search is not that one common word alone."""
    return bool(common) and len(common) <= MAX_COMMON and not (len(common) == 1 and matched == 1)
