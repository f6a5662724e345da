"""Turning what a person typed into a safe FTS5 MATCH expression, for each tokenizer a home may use.

Users type quotes, colons, parentheses, `*`, `-`, `AND`/`NEAR`…, all of which are FTS5 syntax and
would raise or change the meaning of a raw query. Every word is therefore extracted and quoted as a
string literal, and the words are joined with OR so that bm25 ranks messages matching more (and
rarer) words first instead of requiring all of them.

Function words of English and Russian ("what", "did", "we", "about", "the"; "что", "мы", "про"…) are
dropped first: OR-ing them would rank a message by how many function words it shares with the
question, so "what did we decide about the deploy" searches "decide" and "deploy". A text made only
of stop words ("what is it?") keeps them all: searching for something beats searching for nothing.

Words are runs of letters and digits; a run of Chinese characters or Japanese kana is a word of its
own even when glued to Latin letters ("叫Mimi" → "叫", "mimi"). With the `trigram` tokenizer
(`database.tokenizer`, docs/memory/languages.md) the index holds no words, only every three
characters: a run written without spaces (a whole Chinese clause) is searched by its overlapping
three-character pieces, so a message sharing a word of three characters or more with the question
matches, and the more pieces it shares the better it ranks. A term shorter than three characters
cannot be asked of a trigram index (FTS5 matches nothing): `short_terms` are what full-text search
then looks up by substring instead (store/sqlite/search.py).
"""

from __future__ import annotations

import re

from klaw.config import FullTextTokenizer

# Scripts written without spaces between words: Japanese kana, CJK ideographs (and their extensions).
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
WORD = re.compile(rf"[{_UNSPACED}]+|[^\W{_UNSPACED}]+", re.UNICODE)
# Each ASCII byte `WORD` does not hold (all but letters, digits and "_") as a space, for `word_runs`.
_ASCII_WORD_BYTES = bytes(c if chr(c).isalnum() or c == ord("_") else ord(" ") for c in range(128)) + bytes(128)
_UNSPACED_RUN = re.compile(rf"[{_UNSPACED}]+")
MAX_TERMS = 32
TRIGRAM = 3  # characters per piece of the trigram tokenizer
_STEM_MIN = 4  # letters a word shares with its other forms, at least (as word_evidence's same-word rule)

# Function words of English, lowercase, plus the pieces `\w+` cuts contractions into ("don't" →
# "don", "t"); then Russian's. Kept short on purpose: a word missing here only costs ranking, never a match.
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can couldn d did didn do does doesn doing don down during each few for
    from further had hadn has hasn have haven having he her here hers herself him himself his how i if
    in into is isn it its itself just ll m me more most my myself no nor not now o of off on once only
    or other our ours ourselves out over own re s same shan she should shouldn so some such t than that
    the their theirs them themselves then there these they this those through to too under until up us
    ve very was wasn we were weren what when where which while who whom why will with won would
    wouldn y you your yours yourself yourselves
    а без бы был была были было быть в вам вас во вот все всё вы где да для до его ее её если есть
    ещё еще же за и из или им их к как какая какой кто ли меня мне мной мы на над не него нее неё нет
    ни них но ну о об он она они оно от по под при про с со та так там те тебе тебя то тоже того той
    тот ты у уже чем что чтобы эта это этот я
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def word_runs(text: str) -> list[str]:
    """`WORD.findall(text)`: every word as written, in order. An ASCII text (most of what a search
    reads) takes a path ~5× cheaper than the regex, with the same words: there `WORD` keeps the runs
    of letters, digits and "_", which is what is left once every other byte is a space. Hybrid search
    counts and compares the words of every message it ranks, ~200 a search (decision 266)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split()
    return WORD.findall(text)


def words_of(text: str) -> list[str]:
    """Every lowercase word of `text`, in order, repeats included (letters and digits; a run of
    Chinese or Japanese apart from the Latin letters around it)."""
    return [word.lower() for word in word_runs(text)]


def search_words(text: str) -> list[str]:
    """The distinct lowercase words of `text` worth searching for, in order: its content words,
    or all of its words when every one is a stop word. At most MAX_TERMS."""
    words = list(dict.fromkeys(words_of(text)))
    content = [word for word in words if word not in STOP_WORDS]
    return (content or words)[:MAX_TERMS]


def is_unspaced(word: str) -> bool:
    """Whether `word` is written in a script without spaces (Chinese, Japanese kana)."""
    return _UNSPACED_RUN.fullmatch(word) is not None


def search_terms(text: str, tokenizer: FullTextTokenizer = "porter") -> list[str]:
    """What the index is asked for: the search words, and with `trigram` each word written without
    spaces cut into its overlapping three-character pieces. Distinct, at most MAX_TERMS."""
    words = search_words(text)
    if tokenizer != "trigram":
        return words
    terms: list[str] = []
    for word in words:
        if is_unspaced(word) and len(word) > TRIGRAM:
            terms.extend(word[i : i + TRIGRAM] for i in range(len(word) - TRIGRAM + 1))
        else:
            terms.append(word)
    return list(dict.fromkeys(terms))[:MAX_TERMS]


def matchable(term: str, tokenizer: FullTextTokenizer) -> bool:
    """Whether FTS5 can find `term` (a trigram index cannot find fewer than three characters)."""
    return tokenizer != "trigram" or len(term) >= TRIGRAM


def short_terms(text: str, tokenizer: FullTextTokenizer) -> list[str]:
    """The terms of `text` the index cannot be asked for (trigram: under three characters)."""
    return [term for term in search_terms(text, tokenizer) if not matchable(term, tokenizer)]


def count_expression(word: str, tokenizer: FullTextTokenizer) -> str | None:
    """The expression counting the messages that hold `word` in their own text, in any of its forms
    as far as the tokenizer can tell; None when the index cannot answer it (`short_terms`).

    porter stems English ("dogs" counts "dog"). Without a stemmer, a word of another language is
    counted by its first letters: `unicode61` as a prefix of at least four letters, the last two of a
    longer word left off ("Шарика" counts "Шарик", "Шарику"), `trigram` as a substring the same way.
    Counting too many only makes a word less rare; counting too few would call a name said in
    another form never said (memory/unknown_names.py)."""
    if tokenizer == "porter" or is_unspaced(word):
        return "{content} : " + quoted(word) if matchable(word, tokenizer) else None
    stem = word[:-2] if len(word) > _STEM_MIN + 1 else word
    if tokenizer == "unicode61":
        return "{content} : " + quoted(stem) + (" *" if len(stem) >= _STEM_MIN else "")
    return "{content} : " + quoted(stem) if matchable(stem, tokenizer) else None


def fts5_match_expression(text: str, tokenizer: FullTextTokenizer = "porter") -> str | None:
    """An FTS5 expression OR-ing the search terms of `text` the index can answer, or None when none.

    Each term is a quoted FTS5 string (a `"` doubled), so no character a person types is syntax."""
    terms = [quoted(term) for term in search_terms(text, tokenizer) if matchable(term, tokenizer)]
    return " OR ".join(terms) if terms else None


def quoted(word: str) -> str:
    """`word` as an FTS5 string literal: never syntax, whatever it contains."""
    return '"' + word.replace('"', '""') + '"'
