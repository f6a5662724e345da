"""Whether two stores answer the same searches: `klaw db migrate --to postgres` checks a moved home.

Row counts show that every row arrived, not that the rows are found: a message in the wrong chat or
segment, a vector of another text, a full-text column left empty would all count right. So the move
also searches both stores with sample queries — the texts of messages spread over the source's chats,
each searched in its own chat — and compares which messages come back, by record id (rowids differ
between stores).

Each sample must first be stored alike on both sides (its chat, role, time and text). The searches are
judged as far as they can be equal (docs/decisions/199-migration-search-check.md):
vector search is exact on both backends over vectors of the same embedder, so its ids must come back
in the same order (distances within a rounding error count as a tie); full text is each backend's own
ranking (decision 130: close, not identical), so a sample must find its own message on both sides,
and the other hits are compared and shown, not required to be equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from klaw.memory.embedder.protocol import Embedder, embed_queries
from klaw.store.protocol import Storage
from klaw.store.records import SearchHit, StoredMessage

HITS = 10  # results compared per query
_TIE = 1e-5  # cosine distances this close are a tie: their order is the backend's
_PER_SEGMENT = 40  # newest messages of a segment considered as samples
_SEGMENTS_PER_CHAT = 3  # first, middle and last segment of a chat

ParityProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class QueryDifference:
    """One sample whose results differ: which message's text it was, which search, what differs (ids only)."""

    message_id: str
    search: str  # "stored message", "vector" or "full text"
    missing: tuple[str, ...]  # ids the source found and the target did not
    extra: tuple[str, ...]  # ids the target found and the source did not
    order_only: bool  # the same ids in another order


@dataclass
class ParityReport:
    queries: int = 0
    vector_compared: bool = False
    vector_equal: int = 0
    full_text_equal: int = 0  # the same ids in the same order
    full_text_same_set: int = 0  # the same ids, in another order
    full_text_own_found: int = 0  # the sample's own message found on both sides
    full_text_hits: int = 0  # the source's hits over all samples
    full_text_shared: int = 0  # of them, those the target found too
    failures: list[QueryDifference] = field(default_factory=list)  # what must be equal and is not
    differences: list[QueryDifference] = field(default_factory=list)  # full-text ranking that differs

    @property
    def ok(self) -> bool:
        return not self.failures


async def sample_messages(store: Storage, count: int) -> list[StoredMessage]:
    """Up to `count` conversation messages with text, spread over the store's chats (round robin) and,
    within a chat, over its first, middle and last segments; the same store gives the same sample."""
    per_chat: list[list[StoredMessage]] = []
    for chat in await store.segments.chats():
        segments = await store.segments.list(chat)
        picked = {segments[0].id, segments[len(segments) // 2].id, segments[-1].id} if segments else set()
        found: list[StoredMessage] = []
        for segment_id in sorted(picked)[:_SEGMENTS_PER_CHAT]:
            window = await store.messages.window(segment_id, _PER_SEGMENT)
            found.extend(m for m in window if m.record.is_conversation and len(m.content.split()) >= 2)
        if found:
            per_chat.append(found)
    pool = [chat[i] for i in range(max((len(c) for c in per_chat), default=0)) for chat in per_chat if i < len(chat)]
    if len(pool) <= count:
        return pool
    step = len(pool) / count
    return [pool[int(i * step)] for i in range(count)]


async def compare_searches(
    source: Storage,
    target: Storage,
    samples: Sequence[StoredMessage],
    embedder: Embedder | None,
    progress: ParityProgress | None = None,
) -> ParityReport:
    """Search `source` and `target` alike with each sample's text; `embedder` None leaves vectors out."""
    report = ParityReport(queries=len(samples), vector_compared=embedder is not None)
    for done, sample in enumerate(samples, 1):
        chat, text, own = sample.record.chat, sample.content, sample.record.id
        old = await source.search.full_text(chat, text, limit=HITS)
        new = await target.search.full_text(chat, text, limit=HITS)
        moved = await target.messages.get(own)
        if moved is None or not _same_record(sample, moved):
            report.failures.append(QueryDifference(own, "stored message", (own,), (), order_only=False))
        difference = _difference(own, "full text", _ids(old), _ids(new))
        report.full_text_hits += len(old)
        report.full_text_shared += len(set(_ids(old)) & set(_ids(new)))
        found_on_both = own in _ids(old) and await _finds(target, sample, new)
        report.full_text_own_found += found_on_both
        if difference is None:
            report.full_text_equal += 1
        else:
            report.full_text_same_set += difference.order_only
            # Not found although the target finds other messages: the message is not searchable there. No
            # hit at all is a query of words the target's full text leaves out (its stop words).
            unsearchable = own in _ids(old) and not found_on_both and bool(new)
            (report.failures if unsearchable else report.differences).append(difference)
        if embedder is not None:
            vector = (await embed_queries(embedder, [text]))[0]
            near_old = await source.search.nearest(chat, vector, limit=2 * HITS)
            near_new = await target.search.nearest(chat, vector, limit=2 * HITS)
            cut = near_old[HITS - 1].score + _TIE if len(near_old) >= HITS else float("inf")
            difference = _difference(own, "vector", _tie_ordered(near_old, cut), _tie_ordered(near_new, cut))
            if difference is None:
                report.vector_equal += 1
            else:
                report.failures.append(difference)
        if progress is not None:
            progress(done, len(samples))
    return report


def _same_record(old: StoredMessage, new: StoredMessage) -> bool:
    """The same message in the same chat, said by the same role at the same time (PostgreSQL's text
    cannot hold NUL: it keeps U+FFFD in its place)."""
    a, b = old.record, new.record
    same_text = a.content.replace("\x00", "\ufffd") == b.content.replace("\x00", "\ufffd")
    return (a.chat, a.role, a.created_at) == (b.chat, b.role, b.created_at) and same_text


async def _finds(store: Storage, sample: StoredMessage, hits: Sequence[SearchHit]) -> bool:
    """Whether the store's full text finds the sample's own message: among `hits`, else further down
    (another ranking may put messages sharing its words first)."""
    if sample.record.id in _ids(hits):
        return True
    more = await store.search.full_text(sample.record.chat, sample.content, limit=5 * HITS)
    return sample.record.id in _ids(more)


def _ids(hits: Sequence[SearchHit]) -> list[str]:
    return [hit.message.record.id for hit in hits]


def _tie_ordered(hits: Sequence[SearchHit], cut: float) -> list[str]:
    """Ids of the hits up to distance `cut` (the source's tenth, so hits tied with it on either side are
    all kept), a tie within rounding ordered by id: two exact searches list them alike."""
    keyed = sorted((h for h in hits if h.score <= cut), key=lambda h: (round(h.score / _TIE), h.message.record.id))
    return [hit.message.record.id for hit in keyed]


def _difference(message_id: str, search: str, old: list[str], new: list[str]) -> QueryDifference | None:
    if old == new:
        return None
    missing = tuple(i for i in old if i not in new)
    extra = tuple(i for i in new if i not in old)
    return QueryDifference(message_id, search, missing, extra, order_only=not missing and not extra)
