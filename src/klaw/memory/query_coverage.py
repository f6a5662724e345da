"""How much of what the search text asks about a message holds: a factor on its score.

Fusion and neighbours rank by how strongly a message matches, not by how much of the question it
answers. "When did Caroline go to the LGBTQ support group?" matches a message about any support
group, and one about Caroline's week, by bm25 and by meaning; the message naming the group *and*
going to it is what was asked for. After the other steps each message's score is multiplied by
1 + `coverageWeight` × the share of the search text's content words its own text holds (a reply
shown with its question, `HybridHit.asked`, holds the question's words too: the two reach the
model together). Auto-RAG shows 3 messages, so the order of the first few is what a person's
agent sees (docs/decisions/232-query-word-coverage.md).

Words are those full text searches (`fts_query.search_words`, function words left out). Two words
are the same word when they are equal or, once a light ending is taken off ("-s", "-es", "-ed",
"-ing", "-ly", a final "-e" for Latin letters; the last two letters of a longer word in other scripts, as
`fts_query.count_expression` counts a word without a stemmer), one of at least four letters begins
the other: "painted" holds "painting", "dogs" holds "dog", "Шарика" holds "Шарик". This is a rule
of its own, not the index's: it needs no store round trip and ranks the same on SQLite (porter,
unicode61, trigram) and PostgreSQL. Runs of Chinese or Japanese characters have no word
boundaries, so they are not counted: a question written in them gets factor 1 (Latin names and
numbers inside it still count).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from klaw.memory.message_weight import READ_CHARS
from klaw.memory.word_evidence import SAME_STEM_CHARS, same_word
from klaw.store.sqlite.fts_query import STOP_WORDS, is_unspaced, search_words, word_runs

_LATIN_ENDINGS = ("ing", "ed", "ly")
_SIBILANTS = ("s", "x", "z", "ch", "sh")
_MIN_STEM = 3  # an ending is taken off only when this much is left ("is", "red" stay)
_NONE: frozenset[str] = frozenset()
_OTHER_SCRIPT_CUT = 2  # the letters a word of another script loses when longer than five


def query_words(text: str) -> list[str]:
    """The stems of the content words of `text` that coverage counts (none for small talk or a text
    of function words only)."""
    words = [w for w in search_words(text) if w not in STOP_WORDS and not is_unspaced(w)]
    return list(dict.fromkeys(stem(w) for w in words))


def stem(word: str) -> str:
    """`word` (lowercase) without a light ending."""
    if not word.isascii():
        return word[:-_OTHER_SCRIPT_CUT] if len(word) > SAME_STEM_CHARS + 1 else word
    if not word.isalpha():
        return word  # codes and numbers ("inv2291", "2023") are matched whole
    base = word
    for ending in _LATIN_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= _MIN_STEM:
            base = word[: -len(ending)]
            if len(base) > _MIN_STEM and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # "running" → "run"
            break
    else:
        if word.endswith("es") and word[:-2].endswith(_SIBILANTS):
            base = word[:-2]  # "boxes" → "box"
        elif word.endswith("s") and not word.endswith("ss") and len(word) > _MIN_STEM:
            base = word[:-1]  # "notes" → "note"
    if base.endswith("e") and len(base) > _MIN_STEM:
        base = base[:-1]  # "hike", "hiked" and "hiking" → "hik"
    return base


def covered_share(wanted: list[str], texts: Iterable[str]) -> float:
    """The share, 0..1, of the stems in `wanted` (`query_words`) that `texts` hold (0 without any)."""
    return QueryCoverage(wanted).share(texts)


def coverage_factor(weight: float, wanted: list[str], texts: Iterable[str]) -> float:
    """1 + `weight` × `covered_share`: what a message's final score is multiplied by."""
    return QueryCoverage(wanted).factor(weight, texts)


class QueryCoverage:
    """`covered_share` and `coverage_factor` of one search text, for the many messages one search
    weighs: each distinct word of theirs is stemmed and compared with the text's stems once.

    A search weighs its best 20 hits (and the questions shown with them), which share most of their
    words; comparing every word's stem with every stem of the question, message by message, was ~2 ms
    of the event loop's time in every turn's auto-RAG. What is kept is only for this object's life
    (one search), so no word of a message outlives the search that read it."""

    def __init__(self, wanted: Sequence[str]) -> None:
        self._wanted = tuple(wanted)
        self._matches: dict[str, frozenset[str]] = {}  # a word as written → the wanted stems it is
        # `same_word` holds only between words sharing their first `SAME_STEM_CHARS` letters (or equal
        # ones), so a stem is compared only with the wanted stems that begin as it does (decision 266).
        self._by_start: dict[str, list[str]] = {}
        for q in self._wanted:
            self._by_start.setdefault(q[:SAME_STEM_CHARS], []).append(q)
        self._key_sizes = sorted({len(key) for key in self._by_start}, reverse=True)  # the longest first

    def share(self, texts: Iterable[str]) -> float:
        """The share, 0..1, of the wanted stems that `texts` hold (0 without any)."""
        if not self._wanted:
            return 0.0
        covered: set[str] = set()
        for text in texts:
            # `words_of`, lowercased once per distinct word below; a message's first READ_CHARS only, as
            # message_weight reads it (a megabyte reply cost the event loop 0.65 s a search)
            for word in word_runs(text[:READ_CHARS]):
                matched = self._matches.get(word)
                if matched is None:
                    matched = self._matches[word] = self._matched(word.lower())
                if matched:
                    covered |= matched
        return sum(1 for q in self._wanted if q in covered) / len(self._wanted)

    def factor(self, weight: float, texts: Iterable[str]) -> float:
        """1 + `weight` × `share`: what a message's final score is multiplied by."""
        if weight <= 0 or not self._wanted:
            return 1.0
        return 1.0 + weight * self.share(texts)

    def _matched(self, word: str) -> frozenset[str]:
        """The wanted stems `word` (lowercase) is the same word as. Its stem is `word` with an ending
        cut off, so it begins as `word` does: when no wanted stem's key (`_by_start`: its first
        `SAME_STEM_CHARS` letters, or the whole of a shorter one) begins `word`, none can match and
        the stem is not taken. Most words of the hits a search weighs are such words (~1 ms of the
        event loop's time a search at 100k messages, decision 273)."""
        if not any(word[:size] in self._by_start for size in self._key_sizes):
            return _NONE
        return self._same_as(stem(word))

    def _same_as(self, held: str) -> frozenset[str]:
        """The wanted stems `held` is the same word as (`same_word`: equal, or one of at least
        `SAME_STEM_CHARS` letters beginning the other)."""
        if len(held) < SAME_STEM_CHARS:  # too short to begin another word: only equal is the same
            return frozenset((held,)) if held in self._by_start.get(held, ()) else _NONE
        return frozenset(q for q in self._by_start.get(held[:SAME_STEM_CHARS], ()) if same_word(q, held))
