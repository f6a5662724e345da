"""Words as evidence of relevance: which words of a message are telling in this chat, and which
stored messages hold them.

Recall has two kinds of evidence that an older message bears on what the person just wrote: its
meaning is close (vector distance) or it shares telling words. A name, a code, a place or an id
("Zorblax", "INV-2291", "Carcassonne") is exactly what people ask their memory for, and a small
embedder places a lone rare name far from everything, so words must be able to open the gate on
their own. Not every shared word is evidence, though: "ok thanks" shares "thanks" with half a chat.

A word is telling when:
- it is a content word: not a function word (`fts_query.STOP_WORDS`) and not small talk
  (`SMALL_TALK`: greetings, thanks, acknowledgements, interjections, in English, Russian and
  Chinese); a message made only of such words ("ok thanks", "good morning", "haha yes", "спасибо,
  понятно", "好的谢谢") recalls nothing at all, by either kind of evidence;
- it is rare in the scope searched (the segment, or the chat's past): held in the own text of at
  most max(`RARE_MIN_MESSAGES`, `RARE_MAX_SHARE` × the scope's conversation messages). A word said
  in a tenth of the chat says little about which message is meant, whatever the language;
- it names something: written like a name or a code where it is said or asked (a capital letter
  inside a sentence, all capitals, or digits: "Zorblax", "Kraków", "NASA", "INV-2291"). Rare common
  words are everywhere in a long chat: on LoCoMo, a question about another conversation shares one
  with some message four times in five ("research", "funny"), while a name rarely crosses over.

The counts come from the full-text index (`SearchRepository.word_counts`, a bounded count per
word), so the same stemming applies as in search: "dogs" counts "dog" (with the `porter` tokenizer;
`unicode61` counts whole words, `trigram` the messages holding the word anywhere). Chinese has no
capital letters, so a Chinese name is not "written like a name": there, words open the gate only
for Latin names, codes and numbers, and recall rests on meaning (docs/memory/languages.md). Why these figures:
docs/decisions/080-word-evidence-gate.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, StoredMessage, WordCounts
from klaw.store.sqlite.fts_query import STOP_WORDS, WORD, is_unspaced, search_words, word_runs

RARE_MAX_SHARE = 0.02
RARE_MIN_MESSAGES = 2

# Words of English small talk: a message made of these and function words asks nothing of memory.
# A closed class like the function words; a word missing here can still be rare in a chat and
# open the gate, which the share above then limits.
_SMALL_TALK_TEXT = """
    ah aha alright anyway awesome bye cheers cool evening fine gm gn good goodbye goodnight great
    ha haha hahaha hehe hello hey hi hmm hmmm k kk lol lmao lot lots morning nice night no nope ok okay oh
    oops please right sorry sure thank thanks thx ty well wow ya yay yea yeah yep yes yup
    ага ахах ахаха благодарю давай дела день добрый доброе договорились извини извините класс клево
    конечно круто ладно ночи норм нормально ок окей отлично пожалуйста пока понятно привет прости
    спасибо спокойной спс супер угу утро хаха хорошо ясно здравствуй здравствуйте вечер
"""
# Chinese small talk, found inside a run of characters (no spaces mark where its words end): a run
# made only of these is small talk ("好的谢谢"), longest first so "谢谢你" goes before "谢谢".
_UNSPACED_SMALL_TALK_TEXT = """
    最近怎么样 早上好 下午好 晚上好 不客气 没问题 知道了 太好了 谢谢你 哈哈哈 你好 您好 谢谢 多谢 好的 好吧
    嗯嗯 哈哈 呵呵 是的 对的 再见 拜拜 晚安 早安 明白 收到 没事 可以 好 嗯 哦 对 行 吗 呢 啊 吧 了 呀
"""
SMALL_TALK = frozenset(_SMALL_TALK_TEXT.split()) | frozenset(_UNSPACED_SMALL_TALK_TEXT.split())
_UNSPACED_SMALL_TALK = sorted(_UNSPACED_SMALL_TALK_TEXT.split(), key=len, reverse=True)


# How many messages holding telling words are looked up to be passed by them (best by bm25 first).
EVIDENCE_LIMIT = 40

_TOKEN = WORD  # the words full text searches: a run of Chinese apart from the Latin name after it
_SENTENCE_END = frozenset(".!?:\n。！？：")
SAME_STEM_CHARS = 4  # "zorblax" and "zorblaxes" are one word when they share this many


def named_words(text: str) -> set[str]:
    """The lowercase words of `text` written like a name or a code: a capital inside a sentence
    ("my dog Zorblax"), all capitals of two letters or more ("NASA"), or a digit ("2291")."""
    found: set[str] = set()
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if (
            any(ch.isdigit() for ch in token)
            or (len(token) > 1 and token.isupper())
            or _inside(text, match.start(), token)
        ):
            found.add(token.lower())
    return found


def _inside(text: str, start: int, token: str) -> bool:
    """Whether `token`, at `start` of `text`, begins with a capital inside a sentence: the last character
    before it that is not a space ends no sentence. Looked back from the token, not over a copy of all the
    text before it (a copy for each word: quadratic in a long message's length)."""
    if not token[0].isupper():
        return False
    at = start - 1
    while at >= 0 and text[at].isspace():  # what str.rstrip() strips
        at -= 1
    return at >= 0 and text[at] not in _SENTENCE_END


def same_word(a: str, b: str) -> bool:
    """One word, or one of at least `SAME_STEM_CHARS` letters beginning the other ("zorblax", "zorblaxes");
    query coverage (`query_coverage.py`) matches its stems by the same rule."""
    if a == b:
        return True
    if len(a) > len(b):
        a, b = b, a  # the shorter first (hybrid search compares ~2,000 pairs a search: no sort)
    return len(a) >= SAME_STEM_CHARS and b.startswith(a)


def _holds(words: Iterable[str], word: str) -> bool:
    return any(same_word(candidate, word) for candidate in words)


def content_words(text: str) -> list[str]:
    """The words of `text` that could tell what it is about: no function words, no small talk (nor a
    run of Chinese made only of small talk)."""
    return [
        word
        for word in search_words(text)
        if word not in STOP_WORDS and word not in SMALL_TALK and not _unspaced_small_talk(word)
    ]


def _unspaced_small_talk(word: str) -> bool:
    if not is_unspaced(word):
        return False
    for phrase in _UNSPACED_SMALL_TALK:
        word = word.replace(phrase, "")
    return not word


def is_small_talk(text: str) -> bool:
    """Whether `text` has no content word ("ok thanks", "good morning!", "what?")."""
    return not content_words(text)


@dataclass(frozen=True, slots=True)
class WordScope:
    """Where a word is looked for: a chat's messages, of one segment, of its segments before
    `before_segment_id` (its past conversations) or all, less `exclude` (rowids: the window and the
    message asking, which holds its own words)."""

    chat: ChatRef
    segment_id: int | None = None
    before_segment_id: int | None = None
    exclude: Collection[int] = ()

    async def word_counts(self, store: Storage, words: Iterable[str], *, max_share: float, min_cap: int) -> WordCounts:
        """How many of the scope's messages hold each word (bounded counts: `SearchRepository.word_counts`)."""
        return await store.search.word_counts(
            self.chat,
            " ".join(words),
            max_share=max_share,
            min_cap=min_cap,
            segment_id=self.segment_id,
            before_segment_id=self.before_segment_id,
            exclude=sorted(self.exclude),
        )


async def telling_words(store: Storage, scope: WordScope, text: str) -> list[str]:
    """The content words of `text` that are rare in the scope and held by at least one message of it."""
    words = content_words(text)
    if not words:
        return []
    found = await scope.word_counts(store, words, max_share=RARE_MAX_SHARE, min_cap=RARE_MIN_MESSAGES)
    limit = max(RARE_MIN_MESSAGES, int(RARE_MAX_SHARE * found.messages))
    return [word for word in words if 0 < found.counts.get(word, 0) <= limit]


class _NamedWordTest:
    """Whether a message holds, in its own words, one of `words` written like a name or a code there or in
    the asking text (`asked_names`, from `named_words`): `any(_holds(said, w) and _holds(names, w) for w in
    words)` with `said` the message's lowercase words and `names` its `named_words` and `asked_names`.

    The gate tests the 40-80 candidates of a search this way. Compared word by word (each of a message's
    words with each of `words`, `same_word` every time) it was ~2 ms of the event loop's time a test at 1k
    messages, ~1,700 comparisons (decision 448). Here each distinct word of the messages is matched with
    `words` once a test, and only against those beginning as it does (`same_word` holds only between
    equal words or words sharing their first `SAME_STEM_CHARS` letters, as `query_coverage` uses it); a
    word of `words` a message holds is a name when written with a digit or in capitals, and the message's
    text is read for a capital inside a sentence (`named_words`) only when one begins with a capital and
    nothing else decided. Nothing outlives the test (one search)."""

    def __init__(self, words: Iterable[str], asked_names: Collection[str]) -> None:
        self._words = frozenset(words)
        self._by_start: dict[str, list[str]] = {}
        for word in self._words:
            if len(word) >= SAME_STEM_CHARS:
                self._by_start.setdefault(word[:SAME_STEM_CHARS], []).append(word)
        self._named_by_asker = frozenset(word for word in self._words if _holds(asked_names, word))
        self._matches: dict[str, frozenset[str]] = {}  # a word as written → the words of `words` it is

    def passes(self, content: str) -> bool:
        held: set[str] = set()
        named = capitalised = False  # a held word with a digit or in capitals / one beginning with a capital
        matches = self._matches
        for token in word_runs(content):
            matched = matches.get(token)
            if matched is None:
                matched = matches[token] = self._matched(token.lower())
            if matched:
                held |= matched
                if any(ch.isdigit() for ch in token) or (len(token) > 1 and token.isupper()):
                    named = True
                elif token[0].isupper():
                    capitalised = True
        if named or not held.isdisjoint(self._named_by_asker):
            return True
        # A capital names only inside a sentence (`named_words`): read where the message says it, when it can.
        return capitalised and any(self._matched(name) for name in named_words(content))

    def _matched(self, word: str) -> frozenset[str]:
        """The words of `words` that `word` (lowercase) is the same word as (`same_word`)."""
        equal = word in self._words
        if len(word) < SAME_STEM_CHARS:  # too short to begin another word: only equal is the same
            return frozenset((word,)) if equal else _NONE
        found = [other for other in self._by_start.get(word[:SAME_STEM_CHARS], ()) if same_word(other, word)]
        return frozenset(found) if found else _NONE


_NONE: frozenset[str] = frozenset()


def _named_holders(text: str, messages: Iterable[StoredMessage], exclude: Collection[int]) -> set[int]:
    """Rowids of `messages` holding, in their own words, a content word of `text` written like a name
    or code there or in `text`: the only messages the gate can pass, whatever the counts say."""
    test = _NamedWordTest(content_words(text), named_words(text))
    return {message.rowid for message in messages if message.rowid not in exclude and test.passes(message.content)}


async def messages_with_telling_words(
    store: Storage, scope: WordScope, text: str, candidates: Iterable[StoredMessage]
) -> set[int]:
    """Rowids of the `candidates` (what a search of the scope found) holding, in their own words, a
    word of `text` that is rare in the scope and written like a name or code there or in `text`,
    and found among the best `EVIDENCE_LIMIT` messages holding such words.

    The gate asks this only of candidates, so their texts say first whether any could pass: when
    none holds a content word of `text` written like a name, the answer is empty and the scope is
    neither counted nor searched again (decision 204). Otherwise the rare words are counted and the
    messages holding them looked up (best by bm25 first), as decision 080 has it."""
    holders = _named_holders(text, candidates, scope.exclude)
    if not holders:
        return set()
    words = await telling_words(store, scope, text)
    if not words:
        return set()
    exclude = scope.exclude
    hits = await store.search.full_text(
        scope.chat,
        " ".join(words),
        limit=EVIDENCE_LIMIT + len(exclude),
        segment_id=scope.segment_id,
        before_segment_id=scope.before_segment_id,
    )
    test = _NamedWordTest(words, named_words(text))
    return {hit.message.rowid for hit in hits if hit.message.rowid in holders and test.passes(hit.message.content)}
