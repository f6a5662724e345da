"""Auto-RAG: older messages of the current segment that bear on what the person just wrote.

Before each interactive turn whose segment no longer fits the sliding window, the pending text is
searched (hybrid search, scoped to the segment, without what the context already shows) and the
best few messages are placed in the context as a block "From earlier in this conversation:".

The steps, in order:
1. hybrid search over the segment, 20 candidates a side and their neighbours, the window's and
   pending rowids excluded before ranking (they take no candidate place);
2. relevance gate, weighing both kinds of evidence (`word_evidence`): a message with no content
   word ("ok thanks", "good morning") recalls nothing. Otherwise the gate opens when the closest
   vector candidate (the smallest cosine distance among the non-window candidates) is within
   `relevance_threshold`, or when candidates hold a word of the query that is rare in the segment
   (a name, a code, a place: "Zorblax" is said once, "thanks" everywhere; nothing is counted or
   searched again when no candidate holds a name of the query: decision 204), or when the vector side
   returned nothing (embedder down, vector table missing, or nothing outside the window embedded
   yet: full text is all there is to judge by, and keyword matches beat no recall);
3. per candidate: when the gate opened by vector, one found by the vector side alone must itself
   be within the threshold (KNN always returns the nearest messages, however unrelated) and one
   full text found is kept, its matching words being evidence of their own; when it opened by rare
   words alone, a candidate is kept when it holds one of them or is within the threshold. One that
   is there only as the neighbour of a hit (`context_of`), or is the reply to a question that lent
   it its score (`asked`), is kept when that hit is;
4. the best `top_k` by fused score, a reply shown with the question right before it that lent it
   its score (`HybridHit.asked`: "Sage green" means nothing without "which colour won?") counting
   as one hit; a question already shown with its reply is not counted or shown again;
5. the `max_tokens` budget for the whole block (header included): hits are taken best first while
   they fit; one that does not fit is shortened to the room left (at least MIN_EXCERPT_TOKENS,
   cut at a word, marked "…"), after which the block is full; with less room it is skipped and a
   shorter, lower-ranked one may still fit. A reply's question comes after the reply in this
   order (the reply is the hit): whole when it fits, else its end, where it asks ("…which colour
   won?"), in the room left (at least MIN_EXCERPT_TOKENS), after which the block is full. The
   block lists everything in the order it was said, so the question reads just before its reply.

Whatever goes wrong, recall returns nothing and logs a warning naming the error type (never the
text): auto-RAG must never fail a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from klaw.config import AutoRagConfig
from klaw.llm.tokens import approximate_token_count
from klaw.memory.hybrid_search import CANDIDATES_PER_SIDE, HybridHit, HybridSearch, Phase, top_hits, untimed
from klaw.memory.word_evidence import WordScope, is_small_talk, messages_with_telling_words
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)

HEADER = "From earlier in this conversation:"
MIN_EXCERPT_TOKENS = 24
ELLIPSIS = "…"
_HEADER_TOKENS = approximate_token_count(HEADER + "\n\n")


@dataclass(frozen=True, slots=True)
class RecalledMessage:
    """A hit placed in the block: `text` is the message, or its beginning when the budget cut it."""

    hit: HybridHit
    text: str
    question_of: int | None = None  # for a question shown with its reply: the reply's rowid

    @property
    def truncated(self) -> bool:
        return self.text != self.hit.message.content

    @property
    def line(self) -> str:
        return f"[{self.hit.message.role.value}] {self.text}"


class AutoRagService:
    def __init__(self, config: AutoRagConfig, hybrid: HybridSearch) -> None:
        self._config = config
        self._hybrid = hybrid
        self._store: Storage = hybrid.store

    @property
    def enabled(self) -> bool:
        return self._config.enabled

    async def recall(
        self,
        chat: ChatRef,
        segment_id: int,
        query: str,
        window_rowids: Collection[int],
        *,
        max_tokens: int | None = None,
        phase: Phase = untimed,
    ) -> list[RecalledMessage]:
        """The segment's messages to recall for `query`, best first (empty when disabled, when
        nothing passes the gate, and on any error). `window_rowids` are what the context already
        shows (the window and the pending messages); `max_tokens` can lower the configured budget;
        `phase` times the search's parts and the gate's word check (a turn's phases, decision 404)."""
        if not self._config.enabled:
            return []
        try:
            return await self._recall(chat, segment_id, query, frozenset(window_rowids), max_tokens, phase)
        except Exception as exc:
            log.warning("auto-RAG failed (%s); the turn goes on without it", type(exc).__name__)
            return []

    async def _recall(
        self,
        chat: ChatRef,
        segment_id: int,
        query: str,
        window: frozenset[int],
        max_tokens: int | None,
        phase: Phase,
    ) -> list[RecalledMessage]:
        if is_small_talk(query):
            return []
        hits = await self._hybrid.search(
            chat, query, segment_id=segment_id, limit=CANDIDATES_PER_SIDE, exclude=window, phase=phase
        )
        hits = [hit for hit in hits if hit.message.rowid not in window]
        if not hits:
            return []
        threshold = self._config.relevance_threshold
        distances = [hit.distance for hit in hits if hit.distance is not None]
        if not distances or min(distances) <= threshold:
            hits = _evidenced(hits, threshold)
        else:
            with phase("telling_words"):
                telling = await messages_with_telling_words(
                    self._store,
                    WordScope(chat, segment_id=segment_id, exclude=window),
                    query,
                    (h.message for h in hits),
                )
            if not telling:
                log.debug(
                    "auto-RAG: closest vector candidate at distance %.3f is over the threshold %.3f and no rare"
                    " word matched; nothing recalled",
                    min(distances),
                    threshold,
                )
                return []
            hits = _evidenced(hits, threshold, telling)
        budget = self._config.max_tokens if max_tokens is None else min(max_tokens, self._config.max_tokens)
        recalled = fit_to_budget(top_hits(hits, self._config.top_k), budget)
        log.debug("auto-RAG: %d candidate(s), %d recalled", len(hits), len(recalled))
        return recalled


def _within(hit: HybridHit, threshold: float) -> bool:
    return hit.distance is not None and hit.distance <= threshold


def _evidenced(hits: Sequence[HybridHit], threshold: float, telling: Collection[int] | None = None) -> list[HybridHit]:
    """The hits step 3 keeps, in their order: `telling` (rowids holding a rare word of the query)
    replaces "found by full text" when the gate opened by words alone."""

    def words(hit: HybridHit) -> bool:
        return hit.fts_rank is not None if telling is None else hit.message.rowid in telling

    found = {hit.message.rowid for hit in hits if words(hit) or _within(hit, threshold)}
    return [hit for hit in hits if hit.stays_with(found)]


def fit_to_budget(hits: Sequence[HybridHit], max_tokens: int) -> list[RecalledMessage]:
    """Hits, best first, each followed by the question it brings (`asked`, not shown yet), whose block
    (header included) stays within `max_tokens`."""
    room = max_tokens - _HEADER_TOKENS
    kept: list[RecalledMessage] = []
    for hit in hits:
        placed, room = _place(hit, room, kept)
        question = hit.asked
        if placed and room >= 0 and question is not None and all(r.hit.message != question.message for r in kept):
            _, room = _place(question, room, kept, question_of=hit.message.rowid)
        if room < 0:
            break
    return kept


def _place(
    hit: HybridHit, room: int, kept: list[RecalledMessage], *, question_of: int | None = None
) -> tuple[bool, int]:
    """Appends `hit` to `kept`, whole or shortened (a question from its end); returns whether it was
    placed and the room left, -1 once the block is full (something was shortened)."""
    whole = RecalledMessage(hit, hit.message.content, question_of)
    cost = line_tokens(whole.line)
    if cost <= room:
        kept.append(whole)
        return True, room - cost
    if room - 1 >= MIN_EXCERPT_TOKENS:
        kept.append(RecalledMessage(hit, _shorten(hit, room - 1, from_end=question_of is not None), question_of))
        return True, -1
    return False, room


def line_tokens(line: str) -> int:
    """A line's tokens plus its line break: summed over lines it bounds the block's count."""
    return approximate_token_count(line) + 1


def format_block(recalled: Sequence[RecalledMessage]) -> str:
    """The block as the model reads it, oldest message first (the order they were said in)."""
    ordered = sorted(recalled, key=lambda r: (r.hit.message.record.created_at, r.hit.message.rowid))
    return HEADER + "\n\n" + "\n".join(r.line for r in ordered)


def _shorten(hit: HybridHit, max_tokens: int, *, from_end: bool = False) -> str:
    """The longest beginning of the content (its longest end with `from_end`: where a question
    asks), cut at a word, whose line fits `max_tokens`."""
    content = hit.message.content
    prefix = f"[{hit.message.role.value}] "

    def part(length: int) -> str:
        if from_end:
            return ELLIPSIS + content[len(content) - length :].lstrip()
        return content[:length].rstrip() + ELLIPSIS

    def fits(length: int) -> bool:
        return approximate_token_count(prefix + part(length)) <= max_tokens

    low, high = 0, len(content)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    if from_end:
        cut = content[len(content) - low :]
        space = cut.find(" ")
        if 0 <= space < low * 0.2:
            cut = cut[space:]
        return ELLIPSIS + cut.lstrip()
    cut = content[:low]
    space = cut.rfind(" ")
    if space > low * 0.8:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
