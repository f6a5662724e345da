"""How much a message's own text can be the evidence a search is after, as a factor of its score.

Two kinds of text say less than their words match:

- **Asking.** "What colour will you paint the walls?" holds every word of a later "what colour did I
  paint the walls?", yet the fact is in the reply ("sage green"). Hybrid search already lends a
  question's whole score to its reply (decision 166); the question itself keeps only `ASK_KEEP` of
  its own score for the share of its text that asks (sentences ending in "?" or "？") when a reply
  follows it, so the reply comes first, and a message that tells something and then asks back
  keeps the weight of what it tells.
- **A few words.** "Agreed!", "Can't wait!", "Cool! What did it look like?" say little, but bm25
  favours short texts and they receive their neighbours' shares like any message. A message's score
  is multiplied by n / (n + `FEW_WORDS`) for its n words: 1 word 0.25, 4 words 0.57, 20 words 0.87.

On LoCoMo dev (docs/decisions/209-asking-and-few-words-weigh-less.md) both together took hybrid
R@5 / R@10 from 69.5 / 77.5 to 71.5 / 78.6, every conversation and every category gaining or level.
Words are counted as letter-and-digit runs, and each CJK character as one (Chinese has no spaces).
Both read at most a message's first `READ_CHARS` characters: every search weighs its best hits on the
event loop, and a 5-million-character reply took seconds there; that far in, a message is long
(its length factor ~1) and what it asks is judged by how it begins.
"""

from __future__ import annotations

import re

from klaw.store.sqlite.fts_query import word_runs

ASK_KEEP = 0.2  # what the asking part of a message keeps of its own score
FEW_WORDS = 3  # the length at which a message keeps half its score
READ_CHARS = 20_000

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_WORDS = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
_SENTENCES = re.compile(r"[^.!?。！？]+[.!?。！？]*")
ASK_MARKS = ("?", "？")  # a sentence ending with one asks (a text without either asks nothing)
_CLOSERS = "\"')”’»」 "


def asking_share(text: str) -> float:
    """The share of `text`'s characters, 0..1, in sentences that end with a question mark."""
    sentences = [s.strip() for s in _SENTENCES.findall(text[:READ_CHARS]) if s.strip()]
    total = sum(len(s) for s in sentences)
    if not total:
        return 0.0
    return sum(len(s) for s in sentences if s.rstrip(_CLOSERS).endswith(ASK_MARKS)) / total


def length_factor(text: str) -> float:
    """n / (n + FEW_WORDS) for the n words of `text` (0 for a text without any)."""
    text = text[:READ_CHARS]
    words = len(word_runs(text)) if text.isascii() else len(_WORDS.findall(text))
    return words / (words + FEW_WORDS)


def weighed(score: float, own: float, text: str, *, replied: bool) -> float:
    """A message's final score from `score` (its own fused score `own` plus what neighbours lent it):
    the asking part of its own score mostly taken off when the message `replied` to holds what was
    asked (a question nobody answered stays what the search can show), then the whole scaled by its
    length."""
    asking = asking_share(text) if replied else 0.0
    return (score - own * (1.0 - ASK_KEEP) * asking) * length_factor(text)
