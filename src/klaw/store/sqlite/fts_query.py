"""Turning what a person typed into a safe FTS5 MATCH expression.

Users type quotes, colons, parentheses, `*`, `-`, `AND`/`NEAR`…, all of which are FTS5 syntax and
would raise or change the meaning of a raw query. Every word is therefore extracted and quoted as a
string literal, and the words are joined with OR so that bm25 ranks messages matching more (and
rarer) words first instead of requiring all of them.

English stop words ("what", "did", "we", "about", "the"…) are dropped first: OR-ing them would rank
a message by how many function words it shares with the question, so "what did we decide about the
deploy" searches "decide" and "deploy". A text made only of stop words ("what is it?") keeps them
all: searching for something beats searching for nothing.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32

# Function words of English, lowercase, plus the pieces `\w+` cuts contractions into ("don't" →
# "don", "t"). Kept short on purpose: a word missing here only costs ranking, never a match.
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can couldn d did didn do does doesn doing don down during each few for
    from further had hadn has hasn have haven having he her here hers herself him himself his how i if
    in into is isn it its itself just ll m me more most my myself no nor not now o of off on once only
    or other our ours ourselves out over own re s same shan she should shouldn so some such t than that
    the their theirs them themselves then there these they this those through to too under until up us
    ve very was wasn we were weren what when where which while who whom why will with won would
    wouldn y you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def search_words(text: str) -> list[str]:
    """The distinct lowercase words of `text` worth searching for, in order: its content words,
    or all of its words when every one is a stop word. At most MAX_TERMS."""
    words = list(dict.fromkeys(match.group(0).lower() for match in _WORD.finditer(text)))
    content = [word for word in words if word not in STOP_WORDS]
    return (content or words)[:MAX_TERMS]


def fts5_match_expression(text: str) -> str | None:
    """An FTS5 expression OR-ing the search words of `text`, or None when it has no words.

    Each word is a quoted FTS5 string (a `"` doubled), so no character a person types is syntax."""
    terms = [quoted(word) for word in search_words(text)]
    return " OR ".join(terms) if terms else None


def quoted(word: str) -> str:
    """`word` as an FTS5 string literal: never syntax, whatever it contains."""
    return '"' + word.replace('"', '""') + '"'
