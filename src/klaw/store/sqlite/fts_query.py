"""Turning what a person typed into a safe FTS5 MATCH expression.

Users type quotes, colons, parentheses, `*`, `-`, `AND`/`NEAR`…, all of which are FTS5 syntax and
would raise or change the meaning of a raw query. Every word is therefore extracted and quoted as a
string literal, and the words are joined with OR so that bm25 ranks messages matching more (and
rarer) words first instead of requiring all of them.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32


def fts5_match_expression(text: str) -> str | None:
    """An FTS5 expression OR-ing the distinct words of `text`, or None when it has no words."""
    terms: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        if word not in seen:
            seen.add(word)
            terms.append('"' + word.replace('"', '""') + '"')
        if len(terms) == MAX_TERMS:
            break
    return " OR ".join(terms) if terms else None
