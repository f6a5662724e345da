"""The `messages` stage: past segments' own messages, found directly.

A segment's summary is a few sentences; most facts said in it are not there ("we stayed in
Carcassonne", "I took up the cello"), so a question about one of them is not similar to any
summary and the segment-first path never reaches it. This stage runs the one message search
(`HybridSearch`, vector and full text, neighbours) over the messages of the chat's segments before
the current one (a scope the store answers within their rowids, never reading the current
segment's: decision 187), and keeps a message when either kind of evidence says it is related (as auto-RAG
judges its own segment, `auto_rag.py`): its vector is within `max_distance` of the query's, or it
holds a word of the query that is rare in the chat's past and written like a name or a code
(`word_evidence.py`); a neighbour of a kept message, and the reply to a kept question, come along.
When the query names something the chat's past never said (`Retrieval.unknown_names`), only the
second kind counts. At most `MESSAGES_SHOWN` are kept, best first, a reply and the question before
it that lent it its score (`HybridHit.asked`) counting as one: the block shows the question just
before its reply.

Its results are fused with the segment-first path in the block (`FormatBlock`): the segments of
the kept messages are ranked with the similar segments by reciprocal rank fusion, each shown with
its summary and, under it, its messages before its exchanges. The stage also loads the final
summaries of segments found by their messages alone, so the block can name them. Why:
docs/decisions/084-past-messages-stage.md.
"""

from __future__ import annotations

from klaw.memory.hybrid_search import HybridHit, HybridSearch, top_hits
from klaw.memory.past_conversations.pipeline import Retrieval
from klaw.memory.word_evidence import WordScope, is_small_talk, messages_with_telling_words
from klaw.store.protocol import Storage
from klaw.store.summaries.records import SummaryHit

CANDIDATES = 20
MESSAGES_SHOWN = 3
DEFAULT_MAX_DISTANCE = 0.5  # autoRag.relevanceThreshold's default: the same judgement of a message


class PastMessages:
    name = "messages"

    def __init__(self, store: Storage, search: HybridSearch, max_distance: float = DEFAULT_MAX_DISTANCE) -> None:
        self._store = store
        self._search = search
        self._max_distance = max_distance

    async def __call__(self, retrieval: Retrieval) -> Retrieval:
        if is_small_talk(retrieval.query):
            return retrieval
        past = retrieval.current_segment_id
        hits = await self._search.search(retrieval.chat, retrieval.query, limit=CANDIDATES, before_segment_id=past)
        if not hits:
            return retrieval
        telling = await messages_with_telling_words(
            self._store, WordScope(retrieval.chat, before_segment_id=past), retrieval.query, (h.message for h in hits)
        )
        found = {hit.message.rowid for hit in hits if self._close(hit, retrieval) or hit.message.rowid in telling}
        kept = tuple(top_hits([hit for hit in hits if hit.stays_with(found)], MESSAGES_SHOWN))
        if not kept:
            return retrieval
        return retrieval.replace(messages=kept, message_segments=await self._summaries(retrieval, kept))

    def _close(self, hit: HybridHit, retrieval: Retrieval) -> bool:
        """Meaning is evidence unless the query names something the past never said (`UnknownNames`)."""
        return not retrieval.unknown_names and hit.distance is not None and hit.distance <= self._max_distance

    async def _summaries(self, retrieval: Retrieval, kept: tuple[HybridHit, ...]) -> tuple[SummaryHit, ...]:
        """The final summaries of the kept messages' segments, in the order they are first found."""
        summaries: list[SummaryHit] = []
        for segment_id in dict.fromkeys(hit.message.segment_id for hit in kept):
            summary = await self._store.summaries.segment_summary(segment_id)
            if summary is not None and summary.final:
                segment = await self._store.segments.get(segment_id)
                summaries.append(SummaryHit(summary, 0.0, None if segment is None else segment.started_at))
        return tuple(summaries)
