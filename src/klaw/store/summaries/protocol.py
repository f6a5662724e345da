"""The summaries repository of the storage protocol (`Storage.summaries`).

Kept beside `protocol.py` rather than in it: summaries are one concern with many queries (what to
summarize next, folding, vectors, retrieval), and a PostgreSQL backend implements it as one unit.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from klaw.store.records import ChatRef, Exchange, MessageRecord, StoredMessage
from klaw.store.summaries.records import (
    ExchangeScan,
    SegmentWork,
    Summary,
    SummaryCounts,
    SummaryHit,
    SummaryToLog,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# `store/protocol.py`'s `LogFirst` (that module imports this one): the log line's write, run first.
LogFirst = Callable[[], object]


class SummaryRepository(Protocol):
    async def bind_embedder(self, embedder_id: str, dim: int) -> int:
        """Record the embedder for the summary vector table, creating it on first use. Summary vectors
        of another embedder are dropped and every embeddable summary is queued again (summaries are
        few; re-embedding them is cheap); returns how many were queued."""
        ...

    # -- what to summarize -------------------------------------------------------------------------

    async def scan_exchanges(self, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
        """Exchanges with an id above `after_id`, and those in `recheck`, that need a summary or are
        still open (see `ExchangeScan`); at most `limit` from the range. The records of each exchange
        to summarize come with it (`ExchangeScan.messages`): the summarizer's first read of each."""
        ...

    async def pending_exchanges(self) -> int:
        """How many completed exchanges with a final reply have no summary yet."""
        ...

    async def segment_work(
        self,
        *,
        rolling_every: int,
        skip_exchanges: Collection[int],
        limit: int,
        rolling_chars: int | None = None,
    ) -> list[SegmentWork]:
        """Segments that may need their summary written: closed ones with exchange summaries not folded
        in (or a rolling summary not yet final), open ones with at least `rolling_every` new exchange
        summaries or, when `rolling_chars` is given, new exchange summaries of that many characters in
        all. Exchanges in `skip_exchanges` (given up on) do not hold a fold back."""
        ...

    # -- writing -----------------------------------------------------------------------------------

    async def save_exchange_summary(
        self, exchange: Exchange, text: str, model: str, at: datetime, *, sources: Sequence[int] = ()
    ) -> Summary | None:
        """Store (or replace) the exchange's summary and queue its embedding in the same transaction,
        without a log record: for benchmarks and store tests (the summarizers append records instead,
        `memory/summaries/summary_log.py`, so that `klaw reindex` keeps what they wrote).
        `sources` are the rowids of the messages it was written from: when the exchange or one of them
        is gone (forgotten while the model wrote), nothing is stored and None is returned."""
        ...

    async def save_segment_summary(
        self,
        segment_id: int,
        text: str,
        model: str,
        *,
        final: bool,
        covers_exchange_id: int | None,
        exchanges_covered: int,
        at: datetime,
        sources: Sequence[int] = (),
    ) -> Summary | None:
        """Store (or roll forward) the segment's summary; a final one gets its embedding queued in the
        same transaction (a changed text drops the old vector). `sources` are the ids of the summaries
        it was written from: when one is gone (forgotten meanwhile), nothing is stored (None)."""
        ...

    async def mark_final(self, summary_id: int, at: datetime) -> Summary | None:
        """A rolling segment summary that already covers its closed segment becomes final (and queued)."""
        ...

    # -- the log's summary records (store/summaries/log_records.py) ------------------------------------

    async def exchange_record_id(self, exchange_id: int) -> str | None:
        """The id of the log record that opened the exchange (what a summary record names it by);
        None for an unknown exchange or one without such a record (logged by an older klaw)."""
        ...

    async def foldable(self, record: MessageRecord) -> bool:
        """Whether appending this summary record now would store its summary: its exchange and every
        record it was written from are still stored (the writer checks before logging it)."""
        ...

    async def summary_record_to_log(self, exchange_id: int, build: Callable[[str], MessageRecord]) -> SummaryToLog:
        """`exchange_record_id` and `foldable` in one call (decision 272): the exchange's opening record's
        id is given to `build` (the summary record naming it), and that record is returned when it is
        `foldable` now. `opened` is False, and `build` is not called, when the exchange has no such record."""
        ...

    async def append_record(
        self, record: MessageRecord, *, log_first: LogFirst | None = None
    ) -> tuple[StoredMessage, Summary | None]:
        """`messages.append` for a summary record (`log_first` run first, then its row and its fold in
        one transaction), and the summary its fold stored from it, read in the same call (decision
        272): None when the fold kept nothing (a source forgotten meanwhile)."""
        ...

    async def unlogged(self, limit: int) -> list[Summary]:
        """Summaries with no log record (written before summaries were logged), exchange summaries
        first, oldest first: the one-time export appends records for them."""
        ...

    # -- reading -----------------------------------------------------------------------------------

    async def get(self, summary_id: int) -> Summary | None: ...

    async def segment_summary(self, segment_id: int) -> Summary | None:
        """The segment's summary, rolling or final."""
        ...

    async def exchange_summary(self, exchange_id: int) -> Summary | None: ...

    async def in_segment(self, segment_id: int) -> list[Summary]:
        """The segment's summary first (if any), then its exchange summaries in exchange order."""
        ...

    async def counts(self) -> SummaryCounts: ...

    # -- vectors -----------------------------------------------------------------------------------

    async def texts(self, summary_ids: Sequence[int]) -> dict[int, str]:
        """Texts of the embeddable summaries among `summary_ids` that still exist (the embedding target)."""
        ...

    async def put_vectors(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        """Store vectors by summary id in one transaction (existing ones kept); returns how many were new."""
        ...

    async def has_past_segments(self, chat: ChatRef, *, exclude_segment_id: int | None) -> bool:
        """Whether the chat has a final segment summary other than of `exclude_segment_id`."""
        ...

    async def nearest_segments(
        self, chat: ChatRef, vector: npt.NDArray[np.float32], *, limit: int, exclude_segment_id: int | None
    ) -> list[SummaryHit]:
        """The chat's final segment summaries closest to `vector`, most similar first, never of
        `exclude_segment_id` (the current segment)."""
        ...

    async def nearest_exchanges(
        self, chat: ChatRef, vector: npt.NDArray[np.float32], *, segment_ids: Sequence[int], limit_per_segment: int
    ) -> list[SummaryHit]:
        """Each segment's exchange summaries closest to `vector` (at most `limit_per_segment` per
        segment), most similar first."""
        ...

    async def reembed_all(self) -> int:
        """Drop every summary vector and queue every embeddable summary again; returns how many."""
        ...

    # -- privacy -----------------------------------------------------------------------------------

    async def forget_exchanges(self, exchange_ids: Collection[int]) -> int:
        """Delete the summaries of these exchanges and of their segments (a segment summary retells its
        exchanges), vectors included; the summarizers write the segments' summaries again from what is
        left. Returns how many summaries were deleted."""
        ...

    async def forget_segments(self, segment_ids: Collection[int]) -> int:
        """Delete every summary of these segments, vectors included; returns how many."""
        ...
