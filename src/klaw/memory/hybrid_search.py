"""Hybrid search over a chat's messages: vector KNN and FTS5 bm25, fused by weighted scores, then
shared with neighbouring messages.

This is the one retrieval path of conversation messages: auto-RAG, `klaw memory search` and the
memory_search tool all call it, so what a person sees on the command line is what the agent would
recall. Each side fetches its own best candidates through the storage protocol; fusion works on
rowids (the key shared by `messages`, `messages_fts` and `vec_messages`).

Ranking, in five steps (`SearchConfig`; why and what each step measured: docs/memory/how-memory-works.md):
1. each side's scores (cosine similarity; −bm25) are rescaled to 0..1 over its own candidates and
   mixed, `vectorWeight` for the vector side and the rest for full text (`fusion.score_fusion`);
2. a candidate said within a date the text names ("on 3 May, 2023", "in July 2023": `named_dates`)
   gets `dateWeight` more, before it lends in step 3 (the person asked about what was said then);
3. each candidate lends `neighbourWeight` × its score to the conversation messages next to it in its
   segment, half as much per further step up to `neighbourSpan` (`neighbour_scores`): an answer is
   often in the message after the one whose words match; a candidate that asks something lends
   its whole score to the message right after it, its reply;
4. asking and few words weigh less (`message_weight`): the part of a message's own score that its
   questions hold mostly goes (its reply, lent all of it, comes first), and every score is scaled
   by n / (n + 3) for the message's n words ("Agreed!" says little, whatever its words match);
5. the best `limit` by that score, reordered so that a message holding more of the text's content
   words comes first (`query_coverage`): each one's score multiplied by 1 + `coverageWeight` × the
   share of those words it holds (a reply shown with its question: both texts). Only the order of
   the best changes, never which they are, so auto-RAG's gate judges the same hits (decision 232);
   and, when the text names one of the people the hits' texts say are speaking ("Melanie: …"),
   each of that person's hits × 1 + `speakerWeight` (`speaker_weight`, decision 255).

Only conversation messages are returned (user and assistant text): tool calls, tool results and
control records are steps of a turn, not something to remember on their own; the final assistant
reply carries their outcome (the embedding queue makes the same choice).

The vector side degrades: if the embedder fails or the vector search raises, the search carries on
with full text alone and logs a warning naming the error type, never the text. A failing full-text
side is an error of the store and propagates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime

from klaw.config import SearchConfig
from klaw.memory.embedder.protocol import Embedder, embed_queries
from klaw.memory.fusion import score_fusion
from klaw.memory.named_dates import named_periods, said_within
from klaw.memory.neighbour_scores import Spread, spread_to_neighbours
from klaw.memory.query_coverage import QueryCoverage, query_words
from klaw.memory.speaker_weight import named_speaker, speaker_factor, speaker_of
from klaw.memory.weighing import best_weighed, least_final, may_ask, weighed_one, worth_reading
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, SearchHit, StoredMessage

log = logging.getLogger(__name__)

DEFAULT_CANDIDATES = 20
CANDIDATES_PER_SIDE = 20  # auto-RAG's candidates per side: `look` ranks over as many, so its scores are the same
# Full text also matches tool results and tool-call records, which are then dropped; fetching
# twice as many keeps them from crowding conversation messages out of the candidates.
FTS_OVERFETCH = 2
QUESTION_MARK = "?"  # a candidate that asks lends its whole score to its reply (`neighbour_scores`)
# Times a named part of a search, as the turn's `PhaseTimes.phase` does (decision 404): the query's
# embedding, each side, the neighbours' read and the ranking, so a turn shows where its auto-RAG went.
Phase = Callable[[str], AbstractContextManager[object]]


def untimed(_name: str) -> AbstractContextManager[object]:
    """A `Phase` that times nothing: every search but a turn's."""
    return nullcontext()


@dataclass(frozen=True, slots=True)
class HybridHit:
    """One message found, with how each side ranked it.

    `score` is the final score (higher is better; at most 1 + what neighbours lent). `distance` is the
    cosine distance to the query (lower is closer; None when the vector side did not return it),
    `fts_rank` its 1-based position among the full-text candidates and `bm25` the FTS5 rank (lower is
    better; both None when full text did not return it). `context_of` is set for a message neither
    side found, which is here only as the neighbour of a hit: that hit's rowid. `asked` is the
    question right before this message that lent it its whole score (decision 166): a reply such as
    "Sage green" says little without it, so the blocks show the two together (decision 209).
    """

    message: StoredMessage
    score: float
    distance: float | None = None
    fts_rank: int | None = None
    bm25: float | None = None
    context_of: int | None = None
    asked: HybridHit | None = None

    def stays_with(self, found: Collection[int]) -> bool:
        """Whether a gate that keeps the rowids in `found` keeps this hit: it is one of them, here
        only as a neighbour of one, or the reply to a question among them (found by its own words or
        not, the reply holds what was asked)."""
        lenders = (self.message.rowid, self.context_of, None if self.asked is None else self.asked.message.rowid)
        return any(rowid in found for rowid in lenders if rowid is not None)


def is_conversation_message(message: StoredMessage) -> bool:
    """User or assistant text that says something (a blank one is no hit and no neighbour)."""
    return message.is_conversation and bool(message.content.strip())


def top_hits(hits: Sequence[HybridHit], top: int) -> list[HybridHit]:
    """The first `top` hits, a reply and the question it brings (`asked`) counting as one: a hit that
    is the question of a reply taken before it is left out (the blocks show it with its reply)."""
    taken: list[HybridHit] = []
    shown: set[int] = set()
    for hit in hits:
        if len(taken) == top:
            break
        if hit.message.rowid in shown:
            continue
        taken.append(hit)
        shown.add(hit.message.rowid)
        if hit.asked is not None:
            shown.add(hit.asked.message.rowid)
    return taken


class HybridSearch:
    """`embedder=None` searches full text only (e.g. the stored vectors belong to another model)."""

    def __init__(self, store: Storage, embedder: Embedder | None, config: SearchConfig | None = None) -> None:
        self._store = store
        self._embedder = embedder
        self._config = config or SearchConfig()

    @property
    def store(self) -> Storage:
        return self._store

    async def look(
        self, chat: ChatRef, text: str, *, segment_id: int | None = None, limit: int = 10
    ) -> list[HybridHit]:
        """What a person looking for `text` is shown (`klaw memory search`, the web page's search,
        `Klaw.search_memory`): the best `limit` of the ranking auto-RAG makes, over its candidates per
        side whatever `limit` is (scores are rescaled over the candidates, so fewer would change
        them), with no relevance gate and no window left out. The same hits and scores wherever one looks."""
        hits = await self.search(chat, text, segment_id=segment_id, limit=max(limit, CANDIDATES_PER_SIDE))
        return hits[:limit]

    async def search(
        self,
        chat: ChatRef,
        text: str,
        *,
        segment_id: int | None = None,
        limit: int = DEFAULT_CANDIDATES,
        exclude: Collection[int] = (),
        until: datetime | None = None,
        before_segment_id: int | None = None,
        phase: Phase = untimed,
    ) -> list[HybridHit]:
        """The best `limit` of the chat's messages for `text`, best first: the best `limit` of each
        side, fused, with their neighbours. `phase` times its parts (a turn's auto-RAG: decision 404).

        `segment_id` limits the search to one segment (None: the whole chat; neighbours are always
        taken from a hit's own segment). Rowids in `exclude` (what the context already shows) are
        removed before ranking, so they take no candidate place and are never added as neighbours;
        each side fetches `limit` more than it would otherwise to make up for them. `until` keeps
        messages created before it, `before_segment_id` those of the chat's segments before that one
        (past conversations: what was said before the current segment).
        """
        if not text.strip() or limit <= 0:
            return []
        excluded = frozenset(exclude)
        scope = _Scope(segment_id, until, before_segment_id)
        # Both sides at once: the query embedding and the KNN product run on their own threads while
        # the database runs the full-text query (the vector side never raises; see `_vector_side`).

        async def text_side() -> list[SearchHit]:
            with phase("full_text"):
                return await self._text_side(chat, text, scope, limit, excluded)

        vector_hits, by_text = await asyncio.gather(
            self._vector_side(chat, text, scope, limit, excluded, phase), text_side()
        )
        with phase("ranking"):
            return await self._ranked(text, vector_hits, by_text, excluded, limit, phase)

    async def _ranked(
        self,
        text: str,
        vector_hits: list[SearchHit],
        by_text: list[SearchHit],
        excluded: frozenset[int],
        limit: int,
        phase: Phase,
    ) -> list[HybridHit]:
        """Both sides' candidates fused, dated, lent to their neighbours, weighed and ordered (the
        module's five steps); the neighbours' read is timed as a part of it."""
        by_vector = _keep(vector_hits, excluded, limit)
        messages = {hit.message.rowid: hit.message for hit in [*by_vector, *by_text]}
        distances = {hit.message.rowid: hit.score for hit in by_vector}
        text_ranks = {hit.message.rowid: (rank, hit.score) for rank, hit in enumerate(by_text, start=1)}
        weight = self._config.vector_weight
        fused = score_fusion(
            [
                ({rowid: 1.0 - distance for rowid, distance in distances.items()}, weight),
                ({rowid: -bm25 for rowid, (_, bm25) in text_ranks.items()}, 1.0 - weight),
            ]
        )
        periods = named_periods(text) if self._config.date_weight > 0 else []
        if periods:
            for rowid in fused:
                if said_within(messages[rowid].record.created_at, periods):
                    fused[rowid] += self._config.date_weight
        asks = {rowid for rowid, message in messages.items() if QUESTION_MARK in message.content}
        # The neighbours not among the candidates (nor excluded) are found with them, each given a share of
        # a score; the rows of those whose text can be weighed are read in the same call (`weighing.worth_reading`).
        with phase("ranking.neighbours"):
            around, others, spread, lowest = await self._spread(messages, fused, asks, excluded, limit)
        for message in others:
            if message.rowid in spread and is_conversation_message(message):
                messages[message.rowid] = message
        # A question lent its score to a reply only where there is one to show.
        reply_to = {
            n: rowid
            for rowid in asks
            for n, d in around.get(rowid, ())
            if n > rowid and d == 1 and n in messages and n in spread
        }
        replied = set(reply_to.values())
        # A candidate's weighing as a question answered (`weighing.least_final`) is its final score when it was
        # answered or asks nothing: not weighed again.
        known = {rowid: score for rowid, score in lowest.items() if rowid in replied or not may_ask(messages[rowid])}
        final = best_weighed(spread, messages, replied, limit, known)

        def hit(rowid: int, asked: HybridHit | None = None) -> HybridHit:
            fts = text_ranks.get(rowid)
            if rowid not in final:  # a question shown with its reply, below the best `limit` itself
                final[rowid] = weighed_one(spread, messages, replied, rowid)
            return HybridHit(
                message=messages[rowid],
                score=final[rowid],
                distance=distances.get(rowid),
                fts_rank=fts[0] if fts else None,
                bm25=fts[1] if fts else None,
                context_of=None if rowid in fused else spread[rowid].lender,
                asked=asked,
            )

        # Best score first; at equal scores a message found by a side before one that is only a
        # neighbour, then the older message: deterministic whatever the backends' order.
        ranked = sorted(final, key=lambda rowid: (-final[rowid], rowid not in fused, rowid))[:limit]
        # Coverage and the speaker reorder the best `limit`, never bring another in: auto-RAG's gate
        # judges the same hits with or without them. A reply counts the words of the question it is
        # shown with.
        wanted = query_words(text) if self._config.coverage_weight > 0 else []
        on = self._config.speaker_weight > 0
        speakers = {rowid: speaker_of(messages[rowid].content) for rowid in ranked} if on else {}
        named = named_speaker(text, speakers.values()) if speakers else None
        if wanted or named is not None:
            coverage = QueryCoverage(wanted)
            for rowid in ranked:
                said = [messages[rowid].content, *([messages[reply_to[rowid]].content] if rowid in reply_to else [])]
                final[rowid] *= coverage.factor(self._config.coverage_weight, said)
                final[rowid] *= speaker_factor(self._config.speaker_weight, named, speakers.get(rowid))
            ranked.sort(key=lambda rowid: (-final[rowid], rowid not in fused, rowid))
        return [hit(rowid, hit(reply_to[rowid]) if rowid in reply_to else None) for rowid in ranked]

    async def _spread(
        self,
        messages: dict[int, StoredMessage],
        fused: dict[int, float],
        asks: set[int],
        excluded: frozenset[int],
        limit: int,
    ) -> tuple[dict[int, list[tuple[int, int]]], list[StoredMessage], dict[int, Spread], dict[int, float]]:
        """Rowid → (neighbour rowid, distance) of the messages around each candidate (`messages`, scored
        `fused`); the messages of those neighbours (not candidates, not excluded) that `weighing.best_weighed`
        can weigh, or that answer a candidate asking (`asks`); every score after spreading; and the
        candidates' lowest possible final scores when they were needed (`weighing.least_final`)."""
        weight = self._config.neighbour_weight
        if weight <= 0 or self._config.neighbour_span <= 0 or not messages:
            return {}, [], spread_to_neighbours(fused, {}, weight, excluded=excluded, asks=asks), {}
        made: list[tuple[dict[int, Spread], dict[int, float]]] = []

        def rows_for(around: dict[int, list[tuple[int, int]]]) -> set[int] | None:
            # Run where the store finds the neighbours (a read thread on SQLite), between its two reads.
            spread = spread_to_neighbours(fused, around, weight, excluded=excluded, asks=asks)
            least, lowest = least_final(spread, messages, limit)
            made.append((spread, lowest))
            return None if least is None else worth_reading(spread, around, asks, least)

        around, others = await self._store.search.neighbours_with_rows(
            list(messages.values()), self._config.neighbour_span, exclude=excluded, keep=rows_for
        )
        if made:
            return around, others, *made[-1]
        return around, others, spread_to_neighbours(fused, around, weight, excluded=excluded, asks=asks), {}

    async def _text_side(
        self, chat: ChatRef, text: str, scope: _Scope, limit: int, excluded: frozenset[int]
    ) -> list[SearchHit]:
        """The best `limit` conversation messages by full text, `excluded` left out: the first
        `limit` of those among the `FTS_OVERFETCH * limit + len(excluded)` best matches. The store
        leaves `excluded` out itself, so the overfetch for them is only read when the matches it
        returned hold too few conversation messages (tool steps crowding them out)."""

        async def matches(count: int, left_out: frozenset[int]) -> list[SearchHit]:
            return await self._store.search.full_text(
                chat,
                text,
                limit=count,
                segment_id=scope.segment_id,
                until=scope.until,
                before_segment_id=scope.before_segment_id,
                exclude=left_out,
            )

        wanted = FTS_OVERFETCH * limit
        hits = await matches(wanted, excluded)
        kept = _keep(hits, excluded, limit)
        if len(kept) == limit or len(hits) < wanted or not excluded:
            return kept  # every match was seen, or the first `limit` of them are the answer
        return _keep(await matches(wanted + len(excluded), frozenset()), excluded, limit)

    async def _vector_side(
        self, chat: ChatRef, text: str, scope: _Scope, limit: int, excluded: frozenset[int], phase: Phase
    ) -> list[SearchHit]:
        if self._embedder is None:
            return []
        try:
            with phase("query_embedding"):
                vectors = await embed_queries(self._embedder, [text])
            with phase("vector"):
                hits = await self._store.search.nearest(
                    chat,
                    vectors[0],
                    limit=limit,
                    segment_id=scope.segment_id,
                    until=scope.until,
                    before_segment_id=scope.before_segment_id,
                    exclude=excluded,
                )
        except Exception as exc:
            log.warning("hybrid search: vector side unavailable (%s); using full text only", type(exc).__name__)
            return []
        return sorted(hits, key=lambda hit: hit.score)  # closest first, whatever order the backend used


@dataclass(frozen=True, slots=True)
class _Scope:
    segment_id: int | None
    until: datetime | None
    before_segment_id: int | None


def _keep(hits: list[SearchHit], excluded: frozenset[int], limit: int) -> list[SearchHit]:
    """Conversation messages not excluded, best first, each rowid once, at most `limit`."""
    kept: list[SearchHit] = []
    seen: set[int] = set()
    for hit in hits:
        rowid = hit.message.rowid
        if rowid in excluded or rowid in seen or not is_conversation_message(hit.message):
            continue
        seen.add(rowid)
        kept.append(hit)
        if len(kept) == limit:
            break
    return kept
