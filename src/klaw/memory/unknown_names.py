"""Names memory has never heard: when a message asks about something by a name the chat never
said, what is merely similar in meaning is about something else.

A small embedder scores topics, not facts: "What did Gina design for her store?" is as close to a
past conversation about someone else's store as to one about Gina's. When the chat has never
said "Gina", no past message can be about her, and a block of similar conversations only misleads
the model (on LoCoMo, nearly every question of another conversation that reached the
past-conversations block got there this way: docs/decisions/165-unknown-names-gate.md). Words can
still open the gate: if the question also names something the chat did say ("Gina's shop on
Elm Street", and Elm Street is in memory), the messages holding that word are evidence.

A name here is a content word written like one where it is asked (`word_evidence.named_words`: a
capital inside a sentence, all capitals, a letter-and-digit code) that is not a date: month and
weekday names and numbers ("on May 3, 2023") say when, and a message carries its time apart from
its words, so a date is never "unknown" for being unsaid. Known means held in the own text of at
least one conversation message of the scope searched (full-text index, same stemming as search).
"""

from __future__ import annotations

from klaw.memory.named_dates import MONTH_NUMBERS
from klaw.memory.word_evidence import WordScope, content_words, named_words
from klaw.store.protocol import Storage

# English calendar words (like the small-talk list, a closed class): a date in a question, not a name.
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thurs fri sat sun"
CALENDAR_WORDS = frozenset(MONTH_NUMBERS) | frozenset(_WEEKDAYS.split())
_ORDINAL_ENDINGS = ("st", "nd", "rd", "th")


def _is_date_part(word: str) -> bool:
    if word in CALENDAR_WORDS or word.isdigit():
        return True
    return word.endswith(_ORDINAL_ENDINGS) and word[:-2].isdigit()


def asked_names(text: str) -> list[str]:
    """The lowercase content words of `text` written like a name or code, dates left out, in order."""
    named = named_words(text)
    return [word for word in dict.fromkeys(content_words(text)) if word in named and not _is_date_part(word)]


async def unknown_names(store: Storage, scope: WordScope, text: str) -> tuple[str, ...]:
    """The names `text` asks about that no conversation message of the scope holds (one bounded
    count per name: at most two index rows each)."""
    names = asked_names(text)
    if not names:
        return ()
    found = await scope.word_counts(store, names, max_share=0.0, min_cap=1)
    return tuple(name for name in names if found.counts.get(name, 0) == 0)
