"""The values of summaries crossing the storage boundary (beside `records.py`, which holds messages).

A summary is derived data: the summarizers write it from an exchange's messages or a segment's
exchange summaries with the routed summarization model. It reaches the database as a log record
(`log_records.py`), so a rebuilt database (`klaw reindex`) has it without a model call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from klaw.store.records import ChatRef, Exchange, MessageRecord, Segment, StoredMessage

SUMMARY_TARGET = "summary"  # an embedding job whose target_rowid is a summaries.id (vec_summaries)


@dataclass(frozen=True, slots=True)
class SummaryToLog:
    """`SummaryRepository.summary_record_to_log`'s answer: whether the exchange has its `exchange_open`
    record (else it was logged by an older klaw, and its summary is stored directly), and the summary
    record built on that record's id when appending it now would store its summary (`foldable`)."""

    opened: bool
    record: MessageRecord | None


class SummaryKind(StrEnum):
    EXCHANGE = "exchange"
    SEGMENT = "segment"


@dataclass(frozen=True, slots=True)
class Summary:
    """One summary. A segment's is rolling (`final` False) until its segment is closed and folded in
    whole; `covers_exchange_id` is the newest exchange it includes (an exchange summary: its own)."""

    id: int
    kind: SummaryKind
    chat: ChatRef
    segment_id: int
    exchange_id: int | None
    text: str
    model: str
    final: bool
    covers_exchange_id: int | None
    exchanges_covered: int
    created_at: datetime
    updated_at: datetime
    record_id: str | None = None  # the log record it was last written from (None: not logged yet)

    @property
    def embeddable(self) -> bool:
        """Exchange summaries and final segment summaries get a vector; rolling ones change too often
        and belong to the open segment, which retrieval never returns."""
        return self.kind is SummaryKind.EXCHANGE or self.final


@dataclass(frozen=True, slots=True)
class SummaryHit:
    """A summary found by vector search; `similarity` is the cosine similarity (1 = same direction)
    and `started_at` when its segment or exchange started (what a reader dates it by)."""

    summary: Summary
    similarity: float
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExchangeScan:
    """One look for exchanges to summarize (`SummaryRepository.scan_exchanges`).

    `to_summarize`: completed exchanges with a final reply and no summary, oldest first. `still_open`:
    ids of exchanges in progress (or abandoned by a crash) to look at again later. `scanned_to`: every
    exchange with a higher id is newer than this scan. `messages`: each exchange to summarize's stored
    records, as `HistoryRepository.exchange_messages` gives them, read in the scan's own call (decision
    272); an exchange missing from it is read when it is needed."""

    to_summarize: list[Exchange]
    still_open: frozenset[int]
    scanned_to: int
    messages: dict[int, list[StoredMessage]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SegmentWork:
    """A segment whose summary may need writing: its summary so far, the exchange summaries not folded
    into it yet (in exchange order, stopping before the first exchange still waiting for its own
    summary), and whether such an exchange exists (`waiting`)."""

    segment: Segment
    summary: Summary | None
    new: list[Summary] = field(default_factory=list)
    waiting: bool = False

    @property
    def closed(self) -> bool:
        return self.segment.ended_at is not None


@dataclass(frozen=True, slots=True)
class SummaryCounts:
    exchanges: int  # exchange summaries
    segments_final: int
    segments_rolling: int
    vectors: int  # summaries with a vector
