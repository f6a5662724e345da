"""`SummaryLog`: the summarizers' summaries written as conversation-log records.

The log is the source of truth: a summary stored only in klaw.db would be lost by `klaw reindex`
and cost a model call per exchange to write again (different text, too). So a summary is appended
to its chat's log as an `exchange_summary` or `segment_summary` record through ingestion, and the
store folds it into `summaries` (with its embedding job) in the append's transaction
(`store/summaries/log_records.py`, `store/summaries/sqlite/fold.py`).

A summary written while what it retells was being forgotten must leave no line in the log either:
the check that its exchange and sources still exist and the append run under
`Ingestion.exclusive`, which `/forget` holds from its plan to its rewritten log files.

An exchange logged by an older klaw has no `exchange_open` record to name: its summary is stored
directly, as before (a reindex would not rebuild that exchange anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, Exchange, MessageRecord, Segment, StoredMessage
from klaw.store.summaries.log_records import exchange_summary_record, segment_summary_record
from klaw.store.summaries.records import Summary


class SummaryLog:
    def __init__(self, ingestion: Ingestion) -> None:
        self._ingestion = ingestion
        self._summaries = ingestion.store.summaries

    async def exchange_summary(
        self, exchange: Exchange, transcript: Sequence[StoredMessage], text: str, model: str, at: datetime
    ) -> Summary | None:
        """Log and store the exchange's summary written from `transcript`; None when the exchange or
        one of those records was forgotten meanwhile (nothing is logged or stored then)."""
        sources_ids = [m.record.id for m in transcript]

        def record(opened: str) -> MessageRecord:
            return exchange_summary_record(
                exchange.chat, text, exchange=opened, sources=sources_ids, model=model, at=at
            )

        opened, summary = await self._append(exchange.chat, exchange.id, record)
        if not opened:
            sources = [m.rowid for m in transcript]
            return await self._summaries.save_exchange_summary(exchange, text, model, at, sources=sources)
        return summary

    async def segment_summary(
        self,
        segment: Segment,
        text: str,
        model: str,
        *,
        final: bool,
        covers_exchange_id: int,
        exchanges_covered: int,
        sources: Sequence[Summary],
        at: datetime,
    ) -> Summary | None:
        """Log and store the segment's summary folded from `sources` (exchange summaries and the
        summary so far); None when one of them was forgotten meanwhile."""
        source_ids = [s.record_id for s in sources if s.record_id is not None]

        def record(covers: str) -> MessageRecord:
            return segment_summary_record(
                segment.chat,
                text,
                covers=covers,
                final=final,
                exchanges_covered=exchanges_covered,
                sources=source_ids,
                model=model,
                at=at,
            )

        unlogged = len(source_ids) < len(sources)  # a source from before summaries were logged
        opened, summary = (False, None) if unlogged else await self._append(segment.chat, covers_exchange_id, record)
        if not opened:
            return await self._summaries.save_segment_summary(
                segment.id,
                text,
                model,
                final=final,
                covers_exchange_id=covers_exchange_id,
                exchanges_covered=exchanges_covered,
                at=at,
                sources=[s.id for s in sources],
            )
        return summary

    async def mark_final(self, summary: Summary, segment: Segment, at: datetime) -> Summary | None:
        """A rolling summary that already covers its closed segment becomes final: the same text
        logged again as final (the fold then queues its embedding)."""
        if summary.covers_exchange_id is None:
            return await self._summaries.mark_final(summary.id, at)
        return await self.segment_summary(
            segment,
            summary.text,
            summary.model,
            final=True,
            covers_exchange_id=summary.covers_exchange_id,
            exchanges_covered=summary.exchanges_covered,
            sources=[summary],
            at=at,
        )

    async def _append(
        self, chat: ChatRef, exchange_id: int, record: Callable[[str], MessageRecord]
    ) -> tuple[bool, Summary | None]:
        """Log `record(id of the exchange's exchange_open record)` if it is foldable now, and return the
        summary its fold stored (None: something it names was forgotten, nothing logged or kept), after
        whether the exchange has that record at all (False: the caller stores the summary directly). The
        record's id and the check are one call to the store, the append and the summary stored another
        (decision 272), under `exclusive` with the append, so that no `/forget` runs between them. First
        it waits (bounded) for a turn of the chat in flight to end, before taking any lock: the turn
        never waits behind a summary's fsync (decision 414)."""
        await self._ingestion.turns.between_turns(chat)
        async with self._ingestion.exclusive:
            found = await self._summaries.summary_record_to_log(exchange_id, record)
            if found.record is None:
                return found.opened, None
            return True, await self._ingestion.accept_summary(found.record)
