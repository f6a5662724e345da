"""What a person names after `/forget` or `klaw memory forget`: the kind, and its id as typed, checked
and (for a saved memory) resolved, with the sentence that says what to type instead.

Exchanges and segments are numbers the store gives out and keeps across rebuilds (decision 100). A
saved memory's id is the start of its `memory_saved` record's id in the log, the same after a
reindex, a migration and on either backend (docs/decisions/245-stable-memory-ids.md): `/memory` and
`klaw memory list` show its first 8 characters; any longer start of it is taken too, as long as it
names one memory. The numbers shown before are refused with where the new ids are shown, never
looked up as a prefix (a number noted before could begin another memory's id).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from klaw.errors import KlawError
from klaw.store.archival_records import MEMORY_ID_CHARS
from klaw.store.records import MAX_ROW_ID

if TYPE_CHECKING:
    from klaw.store.archival_records import MemoryChunk
    from klaw.store.protocol import MemoryChunkRepository
    from klaw.store.records import ChatRef

AMBIGUOUS_SHOWN = 5  # the ids an ambiguous start of one is shown to begin
MAX_MEMORY_ID_CHARS = 64  # a memory's id is its record's (a uuid's 32 hex digits); a longer word is none
WHERE_SHOWN = "/memory in the chat or `klaw memory list` shows each one's id"


class ForgetKind(StrEnum):
    EXCHANGE = "exchange"
    SEGMENT = "segment"
    MEMORY = "memory"


class ForgetError(KlawError, ValueError):
    """The target cannot be forgotten (unknown, another chat's, nothing left); the message says why."""


def typed_target(kind: ForgetKind, word: str) -> int | str:
    """The id `word` names for `kind`: a whole number for an exchange or a segment, the text of a memory's
    id (lower case) for a memory. ForgetError says what is wrong with it."""
    if kind is ForgetKind.MEMORY:
        return _typed_memory_id(word)
    number = whole_number(word)
    if number is None:
        raise ForgetError(
            f"{shown_word(word)} is not {'an' if kind is ForgetKind.EXCHANGE else 'a'} {kind.value} number:"
            f" {kind.value}s are numbered 1, 2, 3 … (at most {MAX_ROW_ID})"
        )
    return number


def whole_number(word: str) -> int | None:
    """`word` as a number from 1 to MAX_ROW_ID, None when it is not one: ASCII digits only (`²` passes
    isdigit() and int() refuses it), and no more of them than MAX_ROW_ID has (int() refuses more than
    4,300 digits with a ValueError, adversary20)."""
    if not (word.isascii() and word.isdigit()) or len(word) > len(str(MAX_ROW_ID)):
        return None
    number = int(word)
    return number if 1 <= number <= MAX_ROW_ID else None


def shown_word(word: str, keep: int = 24) -> str:
    """`word` quoted for an answer, cut to its first `keep` characters: a refusal never echoes a whole paste."""
    return repr(word) if len(word) <= keep else f"{word[:keep]!r}… ({len(word)} characters)"


def _typed_memory_id(word: str) -> str:
    if word.isascii() and word.isdigit() and len(word) < MEMORY_ID_CHARS:
        raise ForgetError(
            f"saved memories no longer have numbers for ids (as {word} was): an id is {MEMORY_ID_CHARS} letters"
            f" and digits, like 3f9a1c2e, and {WHERE_SHOWN}"
        )
    if len(word) > MAX_MEMORY_ID_CHARS or not word.isascii() or not all(c.isalnum() or c in "-_" for c in word):
        # Quoted cut short: a 90,000-character paste was echoed whole (adversary21).
        raise ForgetError(
            f"{shown_word(word)} is not a memory id: an id is letters and digits, like 3f9a1c2e; {WHERE_SHOWN}"
        )
    return word.lower()


async def resolve_memory(memories: MemoryChunkRepository, typed: str, chat: ChatRef | None) -> MemoryChunk | None:
    """The one memory (of `chat`, or of any chat) whose id begins with `typed`; None when none does.
    A start shorter than the shown id must be a whole id (a hand-edited log's short one); a start that
    begins several ids is refused with their longer forms."""
    found = await memories.with_id(typed, chat, limit=AMBIGUOUS_SHOWN + 1)
    whole = [chunk for chunk in found if chunk.record_id.lower() == typed]
    if whole or len(typed) < MEMORY_ID_CHARS:
        return whole[0] if whole else None
    if len(found) > 1:
        more = " or more" if len(found) > AMBIGUOUS_SHOWN else ""
        ids = ", ".join(_distinct(chunk.record_id, found) for chunk in found[:AMBIGUOUS_SHOWN])
        raise ForgetError(f"memory {typed} is the start of {len(found)}{more} memories' ids ({ids}): type more of it")
    return found[0] if found else None


def _distinct(record_id: str, others: list[MemoryChunk]) -> str:
    """`record_id` cut just past where it differs from every other id in `others`, as git shortens."""
    for length in range(MEMORY_ID_CHARS, len(record_id) + 1):
        start = record_id[:length].lower()
        if not any(o.record_id != record_id and o.record_id.lower().startswith(start) for o in others):
            return start
    return record_id.lower()
